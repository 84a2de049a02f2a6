// The GoogleDrive provider; see docs/ARCHITECTURE.md.
