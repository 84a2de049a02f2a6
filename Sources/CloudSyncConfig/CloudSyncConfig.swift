// The CloudSyncConfig target; see docs/ARCHITECTURE.md.
