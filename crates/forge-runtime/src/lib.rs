//! forge-runtime: The runner: tool assembly, guardrails, LLM providers, the agent loop, the audit log and the A2A server.
