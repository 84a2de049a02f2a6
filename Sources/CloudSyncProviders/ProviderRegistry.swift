import CloudSyncCore
import CloudSyncHTTP
import Dropbox
import GoogleDrive
import OneDrive
import WebDAV
import YandexDisk

/// Every provider this build knows, one line each, in the order messages and help list them. Adding a provider is
/// its folder (`Providers/<Name>/`, with `<Name>Descriptor.swift`), its target in Package.swift and one line here.
public enum ProviderRegistry {
    public static let entries: [ProviderEntry] = [
        DropboxDescriptor.entry,
        GoogleDriveDescriptor.entry,
        OneDriveDescriptor.entry,
        YandexDiskDescriptor.entry,
        WebDAVDescriptor.entry,
    ]

    /// The descriptors, for Config (kinds, option keys) and Auth (endpoints, flows, the account check).
    public static let catalog = ProviderCatalog(entries.map(\.descriptor))

    /// The entry of `kind`, nil when this build has no such provider.
    public static func entry(_ kind: ProviderKind) -> ProviderEntry? {
        entries.first { $0.descriptor.kind == kind }
    }
}
