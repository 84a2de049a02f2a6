// The CloudSyncServer target; see docs/ARCHITECTURE.md.
