// The CloudSyncCache target; see docs/ARCHITECTURE.md.
