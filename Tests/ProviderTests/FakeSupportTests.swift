import Foundation
import Testing
import TestSupport

/// The fakes' shared modules check themselves: Range and If-Range (Tests/Fakes/fake_range.py) and the one control
/// protocol and request log (fake_control.py). A failure here means every fake's answers are suspect.
@Suite("fake support library")
struct FakeSupportTests {
    @Test("the shared fake modules pass their own tables", arguments: [("fake_range.py", "cases ok"), ("fake_control.py", "fake_control: ok")])
    func moduleSelfCheck(_ module: (String, String)) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        process.arguments = [RepositoryPaths.fake(module.0).path]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        try process.run()
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        #expect(process.terminationStatus == 0, "\(text)")
        #expect(text.contains(module.1), "\(text)")
    }
}
