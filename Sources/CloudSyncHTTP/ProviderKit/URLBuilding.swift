import CloudSyncCore
import Foundation

/// URLs of API calls: a configured base, a documented route, a query. The one URL builder of the providers.
public enum APIURL {
    /// `base` without its trailing slashes, then `path` appended unchanged (already encoded: a documented route, or
    /// segments from ``PercentEncoding/encode(_:_:)``), then `?name=value&…` with names and values encoded
    /// ``PercentEncoding/Component/unreserved``. Nil unless `base` is an http(s) URL with a host and the result parses.
    public static func make(_ base: URL, path: String, query: [(String, String)] = []) -> URL? {
        guard let scheme = base.scheme?.lowercased(), scheme == "https" || scheme == "http", base.host?.isEmpty == false else { return nil }
        var text = base.absoluteString
        while text.hasSuffix("/") { text.removeLast() }
        text += path
        if !query.isEmpty {
            text += "?" + query.map { PercentEncoding.encode($0.0) + "=" + PercentEncoding.encode($0.1) }.joined(separator: "&")
        }
        return URL(string: text)
    }

    /// ``make(_:path:query:)``, or a `.configuration` error naming the remote, the setting that holds `base` and
    /// the value to set it to.
    public static func build(_ base: URL, path: String, query: [(String, String)] = [], remote: String,
                             setting: String, example: String) throws -> URL {
        guard let url = make(base, path: path, query: query) else {
            throw ProviderError(.configuration, "remote '\(remote)': \(setting) '\(redactedURL(base))' is not an http(s) base URL this provider can use; set it to \(example) or remove it")
        }
        return url
    }
}
