//! Git, the source of truth: clone, fetch, and read one exact revision.
