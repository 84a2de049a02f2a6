// The CloudSyncEngine target; see docs/ARCHITECTURE.md.
