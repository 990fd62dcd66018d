//! What the pages read, in a file of its own so that the pages need nothing from the router
//! (`mod.rs`) that serves them.

use std::sync::Arc;

use crate::sql::engine::Engine;

pub(crate) struct UiState {
    pub engine: Arc<Engine>,
}
