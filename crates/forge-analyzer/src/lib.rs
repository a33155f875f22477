//! forge-analyzer: Risk scoring, policy checks and audit reports for skills.
