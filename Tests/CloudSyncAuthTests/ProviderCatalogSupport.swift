import CloudSyncCore
import CloudSyncProviders

/// The descriptor of `name` from this build's registry: logins are tested with the providers' real facts.
func descriptor(_ name: String) -> ProviderDescriptor {
    guard let found = ProviderRegistry.catalog.descriptor(named: name) else { preconditionFailure("no provider \(name)") }
    return found
}
