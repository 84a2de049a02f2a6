@testable import CloudSyncCore
import Foundation
import Synchronization
import Testing

/// `startThread(named:)`: the OS knows every thread by its name from its first instruction of `body` on, however
/// the new thread and its creator are scheduled (the scheduling test of a pull finds the network thread by name).
@Suite struct NamedThreadTests {
    /// The calling thread's OS name.
    static func osName() -> String {
        ((try? String(contentsOfFile: "/proc/thread-self/comm", encoding: .utf8)) ?? "")
            .trimmingCharacters(in: .newlines)
    }

    @Test(.enabled(if: FileManager.default.fileExists(atPath: "/proc/thread-self/comm")))
    func everyThreadCarriesItsNameFromItsFirstStep() {
        let count = 300
        let seen = Mutex<[String]>([])
        let done = DispatchGroup()
        // Started from several threads at once, so creators are descheduled right after starting a thread.
        DispatchQueue.concurrentPerform(iterations: count) { i in
            done.enter()
            startThread(named: "named-\(i % 7)") {
                seen.withLock { $0.append("\(i % 7) \(NamedThreadTests.osName())") }
                done.leave()
            }
        }
        done.wait()
        let names = seen.withLock { $0 }
        #expect(names.count == count)
        #expect(names.filter { line in
            let parts = line.split(separator: " ", maxSplits: 1)
            return parts.count != 2 || parts[1] != "named-\(parts[0])"
        }.isEmpty, "threads without their name: \(names.filter { !$0.contains("named-") }.prefix(5))")
    }

    @Test(.enabled(if: FileManager.default.fileExists(atPath: "/proc/thread-self/comm")))
    func aLongNameKeepsItsFirst15Bytes() {
        let name = Mutex("")
        let done = DispatchSemaphore(value: 0)
        startThread(named: "cloudsync-a-very-long-name") {
            name.withLock { $0 = NamedThreadTests.osName() }
            done.signal()
        }
        done.wait()
        #expect(name.withLock { $0 } == "cloudsync-a-ver")
    }
}
