//! Integration tests: each starts the real `bucketsql` binary on an ephemeral port with its
//! own data directory and talks to it over TCP like any PostgreSQL client.

mod activity;
mod adaptive;
mod answers;
mod benchmark;
mod browser;
mod bucketing;
mod client_input;
mod clients;
mod common;
mod copy;
mod demo;
mod durability;
mod executor;
mod fixtures;
mod layers;
mod object_storage;
mod operations;
mod plans;
mod protocol;
mod psql;
mod random_queries;
mod readme_layout;
mod refresh;
mod reliability;
mod safety;
mod security;
mod spark;
mod spark_connect;
mod table_statistics;
mod transactions;
mod web_ui;
mod wire;
