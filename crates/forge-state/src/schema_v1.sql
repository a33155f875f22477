CREATE TABLE forge_tasks (
  id TEXT PRIMARY KEY,
  context_id TEXT NOT NULL,
  state TEXT NOT NULL,
  replica TEXT,
  task TEXT NOT NULL,
  result TEXT,
  cancel_requested INTEGER NOT NULL DEFAULT 0,
  created_ms BIGINT NOT NULL,
  updated_ms BIGINT NOT NULL
);
CREATE INDEX forge_tasks_by_state ON forge_tasks (state);
CREATE INDEX forge_tasks_by_created ON forge_tasks (created_ms);
CREATE TABLE forge_task_events (
  task_id TEXT NOT NULL,
  seq BIGINT NOT NULL,
  event TEXT NOT NULL,
  created_ms BIGINT NOT NULL,
  PRIMARY KEY (task_id, seq)
);
CREATE TABLE forge_contexts (
  id TEXT PRIMARY KEY,
  messages TEXT NOT NULL,
  browser_replica TEXT,
  scope TEXT,
  updated_ms BIGINT NOT NULL
);
CREATE TABLE forge_replicas (
  id TEXT PRIMARY KEY,
  address TEXT NOT NULL,
  heartbeat_ms BIGINT NOT NULL
);
