import Delivery
import ParkWiseContract
import MQTT
import Uplink

/// The agent's delivery path as the benches drive it: the delivery core deciding, the session and its outbox
/// carrying it out (the runtime's `deliver`/`drain`, without the state file: no declarations in a bench).
final class BenchUplink {
    let session: UplinkSession
    private var core: DeliveryCore

    init(session: UplinkSession, capacity: Int) {
        self.session = session
        core = DeliveryCore(start: .init(), window: UplinkSession.window, capacity: capacity)
    }

    /// Stores a batch and hands what the core lets go; returns how many events the full outbox gave up.
    @discardableResult
    func accept(_ batch: [OutboxEntry]) -> Int {
        let (lost, recorded) = session.store(batch, sparing: core.sparing(adding: batch.count))
        deliver(.stored(seqs: batch.map(\.event.seq), dropped: lost, recorded: recorded))
        return lost.count
    }

    func handle(_ event: LinkEvent) {
        if let input = session.handle(event) { deliver(input) }
    }

    private func deliver(_ input: DeliveryCore.Input) {
        core.handle(input, at: 0)
        while let effect = core.nextEffect() {
            switch effect {
            case .send(let seq, let replayed): session.send(seq, replayed: replayed)
            case .remove(let seq): session.remove(seq)
            case .refused(let seq, let reason, _): session.noteRefusal(reason, seq: seq)
            case .refusalEnded: session.refusalEnded()
            case .saveState, .stampAnnouncement, .writeFloor, .releaseDropRecords, .discard, .recordDrops, .sendAnnouncement: break
            }
        }
    }
}
