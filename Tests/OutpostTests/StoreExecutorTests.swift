import Dispatch
import Foundation
import Outpost
import OutpostCore
import OutpostSQLite
import OutpostTesting
import Testing

/// Runs a task's own code on a dispatch queue, off the cooperative pool: a
/// caller that still gets the store's answers while the pool is blocked.
private final class CallerExecutor: TaskExecutor {
    let queue = DispatchQueue(label: "outpost.test.caller")

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let executor = asUnownedTaskExecutor()
        queue.async { job.runSynchronously(on: executor) }
    }
}

/// The store's work runs on a queue of its own, never on Swift's
/// cooperative threads; it opens off the caller's thread, and its busy
/// timeout is the app's to set.
@Suite("Store executor and opening", .timeLimit(.minutes(3)))
struct StoreExecutorTests {
    @Test func answersWhileEveryCooperativeThreadIsBlocked() async throws {
        let fixture = try StoreFixture()
        let store = fixture.store
        let width = ProcessInfo.processInfo.activeProcessorCount
        let outcome = await withCheckedContinuation { (done: CheckedContinuation<String?, Never>) in
            // Orchestrated from a thread of its own: the test's own task
            // is suspended meanwhile and holds no pool thread.
            Thread.detachNewThread {
                let started = DispatchSemaphore(value: 0)
                let release = DispatchSemaphore(value: 0)
                for _ in 0..<width {
                    Task.detached {
                        started.signal()
                        release.wait()
                    }
                }
                defer { for _ in 0..<width { release.signal() } }
                for index in 0..<width where started.wait(timeout: .now() + 30) == .timedOut {
                    done.resume(returning: "only \(index) of \(width) cooperative threads could be blocked within 30 s")
                    return
                }
                let answered = DispatchSemaphore(value: 0)
                let result = Locked<String?>("no answer")
                Task(executorPreference: CallerExecutor()) {
                    do {
                        let onStoreQueue = try await store.write { transaction in
                            _ = try transaction.create(Person(name: "while blocked"))
                            return store.executor.isCurrent
                        }
                        let found = try await store.query(Person.self).count
                        result.withLock {
                            $0 = onStoreQueue && found == 1 ? nil : "store ran on its queue: \(onStoreQueue), records: \(found)"
                        }
                    } catch {
                        result.withLock { $0 = "the store threw \(error)" }
                    }
                    answered.signal()
                }
                if answered.wait(timeout: .now() + 20) == .timedOut {
                    done.resume(returning: "the store's write and read did not answer within 20 s while \(width) cooperative threads were blocked")
                    return
                }
                done.resume(returning: result.withLock { $0 })
            }
        }
        #expect(outcome == nil, "\(outcome ?? "")")
    }

    @Test func openSealsWithProgressOnTheStoresQueue() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("device.sqlite")
        let plain = try LocalStore(path: path, collections: StoreFixture.collections)
        try await plain.write { transaction in
            for index in 0..<300 { try transaction.create(Person(name: "p\(index)")) }
        }
        await plain.close()

        let steps = Locked<[OpenProgress]>([])
        let offStoreQueue = Locked(0)
        let onMainThread = Locked(0)
        let cipher = try AESGCMCipher(key: [UInt8](repeating: 7, count: 32))
        let store = try await LocalStore.open(path: path, collections: StoreFixture.collections, cipher: cipher) { step in
            steps.withLock { $0.append(step) }
            if !StoreExecutor.isOnStoreQueue { offStoreQueue.withLock { $0 += 1 } }
            if Thread.isMainThread { onMainThread.withLock { $0 += 1 } }
        }
        let reported = steps.withLock { $0 }
        // 300 records and their 300 queued creates, sealed one by one.
        #expect(reported.first == OpenProgress(sealed: 0, total: 600))
        #expect(reported.last == OpenProgress(sealed: 600, total: 600))
        #expect(reported.count > 10, "progress came in steps, not at the end only (\(reported.count) reports)")
        #expect(zip(reported, reported.dropFirst()).allSatisfy { $0.sealed < $1.sealed }, "progress only moves forward")
        #expect(offStoreQueue.withLock { $0 } == 0, "sealing ran on the store's own queue, not the caller's thread")
        #expect(onMainThread.withLock { $0 } == 0)
        #expect(try await store.query(Person.self).count == 300)
        await store.close()
        // A second open finds nothing to seal and reports nothing.
        steps.withLock { $0 = [] }
        let again = try await LocalStore.open(path: path, collections: StoreFixture.collections, cipher: cipher) { step in
            steps.withLock { $0.append(step) }
        }
        #expect(steps.withLock { $0 }.isEmpty)
        #expect(try await again.query(Person.self).count == 300)
        await again.close()
    }

    @Test func openRefusesWhatInitRefuses() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("device.sqlite")
        let cipher = try AESGCMCipher(key: [UInt8](repeating: 7, count: 32))
        let sealed = try await LocalStore.open(path: path, collections: StoreFixture.collections, cipher: cipher)
        await sealed.close()
        await #expect(throws: StoreError.encrypted) {
            _ = try await LocalStore.open(path: path, collections: StoreFixture.collections)
        }
    }

    @Test func busyTimeoutOutOfRangeIsRefusedBeforeAnythingIsMade() throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("device.sqlite")
        for timeout in [Duration.milliseconds(-1), .seconds(3601)] {
            #expect(throws: StoreError.self) {
                _ = try LocalStore(path: path, collections: StoreFixture.collections, busyTimeout: timeout)
            }
        }
        #expect(!FileManager.default.fileExists(atPath: path), "a refused setting creates no database")
    }

    @Test func busyTimeoutBoundsTheWaitForAnotherConnectionsLock() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("device.sqlite")
        let quick = try LocalStore(path: path, collections: StoreFixture.collections, busyTimeout: .milliseconds(100))
        let patient = try LocalStore(path: path, collections: StoreFixture.collections, busyTimeout: .seconds(60))
        // Another process's write in progress, holding the file's write lock.
        let other = try SQLiteConnection(path: path)
        try other.execute("BEGIN IMMEDIATE")
        await #expect(throws: StoreError.self) { try await quick.create(Person(name: "gives up")) }
        // Past SQLite's usual 5 s: a store told to wait longer still writes
        // once the lock is let go.
        let letGo = Task.detached {
            try await Task.sleep(for: .seconds(6))
            try other.execute("ROLLBACK")
            other.close()
        }
        try await patient.create(Person(name: "waited"))
        try await letGo.value(within: .seconds(60), "the other connection letting its lock go")
        #expect(try await quick.query(Person.self).map(\.value.name) == ["waited"])
        await quick.close()
        await patient.close()
    }
}
