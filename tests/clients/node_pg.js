// node-postgres (`pg`): unnamed and named extended-protocol statements, text results.
//
// Usage: node node_pg.js PORT (with `pg` on NODE_PATH)

const assert = require("node:assert/strict");
const { Client } = require("pg");

const ROWS = [
  ["1", "one", "1.50", "2024-01-15"],
  ["2", "two", "20.25", "2024-02-29"],
  ["3", null, null, null],
];

// pg returns int8 and numeric as strings and a date as a Date at local midnight.
function expected([k, v, price, day]) {
  return { k, v, price, day: day && new Date(`${day}T00:00:00`) };
}

async function main() {
  const client = new Client({ host: "127.0.0.1", port: Number(process.argv[2]), user: "postgres", database: "postgres" });
  await client.connect();
  await client.query(
    "CREATE TABLE t (k BIGINT, v STRING, price DECIMAL(10,2), day DATE) USING parquet " +
      "CLUSTERED BY (k) SORTED BY (k) INTO 4 BUCKETS",
  );
  for (const row of ROWS) {
    const inserted = await client.query("INSERT INTO t VALUES ($1, $2, $3, $4)", row);
    assert.equal(inserted.command, "INSERT");
    assert.equal(inserted.rowCount, 1);
  }

  const byK = await client.query("SELECT k, v, price, day FROM t WHERE k = $1", [2]);
  assert.deepEqual(byK.fields.map((f) => f.name), ["k", "v", "price", "day"]);
  assert.deepEqual(byK.rows, [expected(ROWS[1])]);
  for (const k of [1, 2, 3, 1, 2, 3]) {
    const named = await client.query({ name: "by_k", text: "SELECT k, v, price, day FROM t WHERE k = $1", values: [k] });
    assert.deepEqual(named.rows, [expected(ROWS[k - 1])]);
  }
  const since = await client.query("SELECT k, v, price, day FROM t WHERE day >= $1 OR v IS NULL ORDER BY k", ["2024-01-15"]);
  assert.deepEqual(since.rows, ROWS.map(expected));

  const explain = await client.query("EXPLAIN FORMATTED SELECT k, v FROM t WHERE k = 2");
  assert.deepEqual(explain.fields.map((f) => f.name), ["plan"]);
  assert.equal(explain.rows.length, 1);
  assert.match(explain.rows[0].plan, /^== Physical Plan ==\n/);
  assert.match(explain.rows[0].plan, /Scan parquet spark_catalog\.default\.t/);

  await assert.rejects(client.query("SELECT * FROM missing"), (e) => e.code === "42P01");
  const count = await client.query("SELECT count(*) FROM t");
  assert.deepEqual(count.rows.map(Object.values), [["3"]]);
  await client.end();
  console.log("node-postgres ok");
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
