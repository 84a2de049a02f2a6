import Foundation
import Testing
import TestSupport

/// The fakes' one Range module (Tests/Fakes/fake_range.py) checks its own table; a failure here means every
/// fake's ranged answers are suspect.
@Suite("fake support library")
struct FakeSupportTests {
    @Test("fake_range.py: Range and If-Range answers, table-driven")
    func rangeModuleSelfCheck() throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        process.arguments = [RepositoryPaths.fake("fake_range.py").path]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        try process.run()
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        #expect(process.terminationStatus == 0, "\(text)")
        #expect(text.contains("cases ok"), "\(text)")
    }
}
