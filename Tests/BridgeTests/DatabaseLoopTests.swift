@testable import BridgeKit
import ParkWiseContract
import ParkWiseLog
import Postgres
import Testing

/// The database thread whole — `BatchPolicy`, `DatabaseLoop` and `Applier` — in-process, against `FakeDatabase`:
/// messages pushed into a real feed queue as the link thread pushes them, the loop stepped on the test's thread until
/// what is awaited is done (its waits are real: a backoff's random part is its shortest). What the statements do to a
/// database is the PostgreSQL suites' to test; here, which statements are sent, and what the loop makes of failures.
@Suite struct DatabaseLoopTests {
    static let device = DeviceKey(site: "lot", device: "gate-1")

    /// A database thread, its broker side and its database.
    final class DatabaseThread {
        let broker: FakeBrokerSide
        let db: FakeDatabase
        private var loop: DatabaseLoop
        /// What the loop returned once stopped (nil: running).
        private(set) var abandoned: Int?

        /// `db` scripted before: the loop's first session reads from it at once (the known spots).
        init(db: FakeDatabase = FakeDatabase(), batchSize: Int = 500, stopGrace: Duration = .seconds(20)) {
            var config = BridgeConfig()
            config.batchSize = batchSize
            config.stopGrace = stopGrace
            let broker = FakeBrokerSide(config: config)
            self.broker = broker
            self.db = db
            loop = DatabaseLoop(broker: broker, db: db, gate: DeviceGate(config: config, known: [DatabaseLoopTests.device: .live]),
                                connect: { [db] () throws(PostgresError) -> any Database in try db.connect() },
                                random: { $0.lowerBound })
        }

        /// Events `seqs` of the device (a car on spot A1 each), as its agent publishes them; returns their ids.
        @discardableResult
        func push(_ seqs: ClosedRange<UInt64>) -> [String] {
            seqs.map { seq in
                let digits = String(seq)
                var event = EventPayload(id: "00000000-0000-4000-8000-" + String(repeating: "0", count: 12 - digits.count) + digits,
                                         seq: seq, boot: 1, type: "spot.occupied", at: "2026-11-29T12:00:00.000Z", clock: "synced")
                event.spot = "A1"
                let device = DatabaseLoopTests.device
                broker.feed.push(topic: Topics(site: device.site, device: device.device).events, payload: WireJSON.encode(event))
                return event.id
            }
        }

        /// Steps the loop until `done` holds, for `seconds` at most (a step may wait: a backoff, the feed's next
        /// message); false when it did not come, or the loop stopped first.
        @discardableResult
        func step(until done: () -> Bool, within seconds: Double = 10) -> Bool {
            let deadline = monotonicSeconds() + seconds
            while !done() {
                guard abandoned == nil, monotonicSeconds() < deadline else { return false }
                abandoned = loop.step()
            }
            return true
        }

        /// Asks for the stop and steps the loop until it stops; what it abandoned (nil: it did not stop in time).
        func stop(within seconds: Double = 10) -> Int? {
            broker.isStopping = true
            step(until: { abandoned != nil }, within: seconds)
            return abandoned
        }

        /// The events committed, in order.
        var committed: [String] { db.committedEvents.flatMap { $0 } }
    }

    static func seqs(_ parameters: [String?]) -> [String] { FakeDatabase.elements(parameters[3]) }

    @Test func aBatchOfOneEventWaitsForItsRoundTrips() {
        let db = FakeDatabase()
        db.answer(SQL.knownSpots) { _ in [["A1"]] }
        db.answer(SQL.owners) { _ in [["A1", "lot", "gate-1"]] }   // the site's register gives A1 to the device
        db.answer(SQL.sensorSpots) { _ in [["A1"]] }   // the sensors' view of the spot written
        let thread = DatabaseThread(db: db)
        let id = thread.push(1...1)
        #expect(thread.step(until: { thread.committed == id }))
        // The statements a regression adding a round trip would show: BEGIN, the device locked, the spot's registered
        // owner, the event, the spot, the hold kept for the car, the cursor, the re-assert of the spot in a savepoint
        // COMMIT ends, COMMIT.
        #expect(db.committed.last?.map(\.sql) == [
            "BEGIN", SQL.lockDevices, SQL.owners, SQL.insertEvents, SQL.sensorSpots, SQL.keepHoldsWithArrival,
            SQL.writeCursors, "SAVEPOINT reassert", SQL.reassert, "COMMIT",
        ])
        #expect(thread.stop() == 0)
    }

    @Test func aConnectionLostAtCommitKeepsTheBatchForANewSession() {
        let db = FakeDatabase()
        db.fail("COMMIT", with: FakeDatabase.connectionLost)
        let thread = DatabaseThread(db: db)
        let ids = thread.push(1...5)
        #expect(thread.step(until: { thread.committed.count >= 5 }))
        #expect(db.connects == 1)
        #expect(db.triedEvents == [ids, ids])   // the same batch, again
        #expect(thread.committed == ids)
        #expect(thread.stop() == 0)
    }

    @Test func aMessageWhoseDataIsRefusedIsTheOnlyOneSkipped() {
        let db = FakeDatabase()
        db.fail(SQL.insertEvents, with: FakeDatabase.refused("23514"), times: nil) { Self.seqs($0).contains("7") }
        let thread = DatabaseThread(db: db)
        let ids = thread.push(1...10)
        #expect(thread.step(until: { thread.committed.count >= 9 }))
        // The batch refused, then its messages one by one: every one committed alone but the refused one.
        #expect(db.triedEvents == [ids] + ids.map { [$0] })
        #expect(db.committedEvents == ids.filter { $0 != ids[6] }.map { [$0] })
        // The next batch is whole again.
        let later = thread.push(11...13)
        #expect(thread.step(until: { thread.committed.count >= 12 }))
        #expect(db.committedEvents.last == later)
        #expect(db.connects == 0)
        #expect(thread.stop() == 0)
    }

    @Test func aBatchTheStatementTimeoutCancelsIsCutInHalfThenGrowsBack() {
        let db = FakeDatabase()
        let timeout = FakeDatabase.refused("57014")
        db.fail(SQL.insertEvents, with: timeout, times: nil) { FakeDatabase.elements($0[0]).count > 2 }
        let thread = DatabaseThread(db: db, batchSize: 8)
        let ids = thread.push(1...16)
        #expect(thread.step(until: { thread.committed.count >= 16 }))
        #expect(db.triedEvents.prefix(3).map(\.count) == [8, 4, 2])
        #expect(thread.committed == ids)
        #expect(db.connects == 0)
        // The database fast again: a batch smaller than the limit (the queue held no more) doubles it at once.
        db.stopFailing(SQL.insertEvents)
        thread.push(17...17)
        #expect(thread.step(until: { thread.committed.count >= 17 }))
        thread.push(18...18)
        #expect(thread.step(until: { thread.committed.count >= 18 }))
        let full = thread.push(19...26)
        #expect(thread.step(until: { thread.committed.count >= 26 }))
        #expect(db.committedEvents.last == full)
        #expect(thread.stop() == 0)
    }

    @Test func aDeadlockIsRetriedAtOnceOnTheSameSession() {
        let db = FakeDatabase()
        db.fail(SQL.lockDevices, with: FakeDatabase.refused("40P01"))
        let thread = DatabaseThread(db: db)
        let ids = thread.push(1...3)
        #expect(thread.step(until: { thread.committed.count >= 3 }))
        #expect(thread.committed == ids)
        #expect(db.statements.filter { $0.sql == "ROLLBACK" }.count == 1)
        #expect(db.connects == 0)
        #expect(thread.stop() == 0)
    }

    @Test func aStopCommitsWhatWasReceivedFirst() {
        let thread = DatabaseThread()
        let ids = thread.push(1...3)
        #expect(thread.stop() == 0)
        #expect(thread.committed == ids)
        // The fleet view's last word on this bridge.
        #expect(thread.db.statements.last.map { [$0.sql, $0.parameters.last ?? nil] } == [SQL.brokerLink, "stopped"])
    }

    @Test func aStopWithTheDatabaseDownGivesUpAfterItsGrace() {
        let db = FakeDatabase()
        db.fail("BEGIN", with: FakeDatabase.connectionLost, times: nil)
        let thread = DatabaseThread(db: db, stopGrace: .milliseconds(200))
        thread.push(1...3)
        #expect(thread.step(until: { db.statements.contains { $0.sql == "BEGIN" } }))
        db.refusesConnections = true
        #expect(thread.stop() == 3)
        #expect(thread.committed.isEmpty)
    }
}
