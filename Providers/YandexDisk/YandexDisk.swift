// The YandexDisk provider; see docs/ARCHITECTURE.md.
