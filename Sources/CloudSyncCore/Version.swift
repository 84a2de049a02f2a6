/// The version of cloudsync: what `--version` prints and what the HTTP User-Agent carries. The one place it is set.
public enum CloudSyncVersion {
    public static let string = "0.1.0"
}
