import Delivery
import Glibc
import ParkWiseCLI
import ParkWiseContract
import ParkWiseCore
import ParkWiseLog
import ServiceSetup

/// Commands from the broker, answered on the event loop.
extension AgentRuntime {
    // MARK: - Commands

    /// A command from the broker: answered now, or waiting for room for its reply (`CommandDesk`).
    func command(topic: String, payload: [UInt8], retained: Bool, oversized: Int? = nil) {
        guard topic.hasPrefix(topics.prefix + "/cmd/") else { return }
        let (turnedAway, waiting) = inbox.takeDroppedMessages()
        if let now = commands.received(.init(topic: topic, payload: payload, retained: retained, oversized: oversized),
                                       canReply: session.isConnected && session.canReply,
                                       inbox: (turnedAway, waiting)) {
            answer(now)
        }
    }

    /// Commands that waited for room for their replies, in the order they came.
    func answerWaitingCommands() {
        guard session.isConnected else { return }
        commands.answerWaiting(canReply: { session.canReply }, inbox: { inbox.takeDroppedMessages() }) { answer($0) }
    }

    func answer(_ command: CommandDesk.Command) {
        let name = String(command.topic.dropFirst(topics.prefix.count + 5))
        let reply = CommandHandler.handle(name: name, payload: command.payload, retained: command.retained,
                                          oversized: command.oversized, garage: &garage,
                                          status: name == "diag" && !command.retained ? statusSnapshot.build() : nil)
        if command.oversized == nil { Log.info("command", ["name": String(name.prefix(40)), "ok": reply.ok]) }
        session.publishReply(topic: topics.reply, payload: reply.payload)
        if reply.ok && name == "rebirth" { session.rebirth() }
        stamper.state.setLaneCounts(inGarage { $0.laneCounts })
        stamper.state.save()
        publishChangedStates()
    }
}
