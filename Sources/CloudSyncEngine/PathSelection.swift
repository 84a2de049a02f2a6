import CloudSyncCore

/// The PATH arguments of a pull, for one remote: which files they select, and which of them select nothing.
/// A PATH is a file or a folder relative to the remote's root (`Rock`, `Rock/a.mp3`, leading and trailing
/// slashes ignored), or the same prefixed with the remote's name (`home/Rock`, the form `ls` prints when it
/// lists several remotes). Matching is exact: case matters and there are no globs.
public struct PathSelection: Sendable {
    /// One PATH that selects no file, and the existing path closest to it.
    public struct Unmatched: Sendable, Codable, Hashable {
        public var path: String
        public var closest: String?

        public init(path: String, closest: String?) {
            self.path = path
            self.closest = closest
        }
    }

    public let remote: String
    /// The PATHs as given.
    public let arguments: [String]
    /// For each argument, the paths it may stand for, trimmed of slashes ("" = the whole remote).
    private let forms: [[String]]

    public init(_ arguments: [String], remote: String) {
        self.remote = remote
        self.arguments = arguments
        forms = arguments.map { argument in
            let trimmed = Self.trim(argument)
            let prefix = remote + "/"
            if trimmed == remote { return [trimmed, ""] }
            return trimmed.hasPrefix(prefix) ? [trimmed, String(trimmed.dropFirst(prefix.count))] : [trimmed]
        }
    }

    /// Every file is selected when no PATH was given.
    public var selectsEverything: Bool { arguments.isEmpty }

    /// Whether `path` (a file's path in the remote) is one of the PATHs or lies under one.
    public func selects(_ path: String) -> Bool {
        if forms.isEmpty { return true }
        return forms.contains { $0.contains { Self.isUnder(path, $0) } }
    }

    /// The PATHs that select none of `present` (the remote's files), each with the closest existing file or
    /// folder: compared name by name from the root, so a wrong case or a typo in any component is found
    /// without comparing the PATH with every file of a large library.
    public func unmatched(in present: Set<String>) -> [Unmatched] {
        guard !forms.isEmpty else { return [] }
        var found = Array(repeating: false, count: forms.count)
        for path in present {
            for (i, candidates) in forms.enumerated() where !found[i] {
                if candidates.contains(where: { Self.isUnder(path, $0) }) { found[i] = true }
            }
            if !found.contains(false) { return [] }
        }
        return forms.indices.filter { !found[$0] }.map { i in
            Unmatched(path: arguments[i], closest: Self.closest(to: forms[i].last ?? "", in: present))
        }
    }

    /// The existing file or folder closest to `wanted`: the longest run of leading components that exists,
    /// then the nearest name among the children of that folder, component by component.
    static func closest(to wanted: String, in present: Set<String>) -> String? {
        let parts = wanted.split(separator: "/").map(String.init)
        var folder = ""
        for part in parts {
            let prefix = folder.isEmpty ? "" : folder + "/"
            var children = Set<String>()
            for path in present where path.hasPrefix(prefix) {
                let rest = path.dropFirst(prefix.count)
                if let name = rest.split(separator: "/", maxSplits: 1).first { children.insert(String(name)) }
            }
            let next = children.contains(part) ? part : Suggestion.closest(to: part, among: children.sorted())
            guard let next else { return folder.isEmpty ? nil : folder }
            folder = prefix + next
        }
        return folder.isEmpty || folder == wanted ? nil : folder
    }

    private static func trim(_ path: String) -> String {
        var s = Substring(path)
        while s.hasPrefix("/") { s = s.dropFirst() }
        while s.hasSuffix("/") { s = s.dropLast() }
        return String(s)
    }

    /// Whether `path` is `folder` or lies under it ("" is the root).
    static func isUnder(_ path: String, _ folder: String) -> Bool {
        folder.isEmpty || path == folder || (path.hasPrefix(folder) && path.dropFirst(folder.count).hasPrefix("/"))
    }
}
