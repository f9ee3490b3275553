import ParkWiseLog

/// The commands from the broker (`cmd/…`) the event loop has taken and not answered yet. A command is answered at
/// once when the session may send a reply (not too many unacknowledged) and none waits before it; else it waits for
/// room, among at most `Inbox.messageBound` others, in the order they came. A flood beyond both bounds (what the
/// inbox turned away, and what found no room here) is dropped unread, counted and said, one streak at a time.
struct CommandDesk {
    /// A command as it came: `retained` when it is the broker's stored copy (refused: see `CommandHandler`);
    /// `oversized`: the payload's size when it was over the limit and dropped unread (the payload is then empty).
    struct Command {
        var topic: String
        var payload: [UInt8]
        var retained: Bool
        var oversized: Int?
    }

    private var waiting: [Command] = []
    private var flood = LogStreak(.warn, "commands come faster than they are answered, dropped", ended: "commands answered again")
    /// Commands over `CommandHandler.payloadLimit`, dropped unread (each still refused with a reply).
    private var oversized = LogStreak(.warn, "command over the size limit dropped unread", ended: "commands within the size limit again")

    /// A command came in; `inbox` says what the inbox turned away since and how many still wait there. Returns it when
    /// it is to be answered now (`canReply`), nil when it waits or was dropped.
    mutating func received(_ command: Command, canReply: Bool, inbox: (dropped: Int, waiting: Int)) -> Command? {
        flood.occurred(inbox.dropped)
        if let bytes = command.oversized {
            oversized.occurred(1, ["topic": String(command.topic.prefix(120)), "bytes": bytes, "limit": CommandHandler.payloadLimit,
                                   "hint": "commands are small JSON objects; see what publishes this (the broker's max_packet_size bounds it)"])
        } else {
            oversized.ended()
        }
        var now: Command?
        if canReply && waiting.isEmpty {
            now = command
        } else if waiting.count < Inbox.messageBound {
            waiting.append(command)
        } else {
            flood.occurred()
        }
        if inbox.waiting == 0 && waiting.isEmpty { flood.ended() }
        return now
    }

    /// Answers the waiting commands in order while `canReply()` (each answer takes room), then notes the inbox's count.
    mutating func answerWaiting(canReply: () -> Bool, inbox: () -> (dropped: Int, waiting: Int), _ answer: (Command) -> Void) {
        guard !waiting.isEmpty else { return }
        var answered = 0
        while canReply() && answered < waiting.count {
            answer(waiting[answered])
            answered += 1
        }
        waiting.removeFirst(answered)
        let (turnedAway, stillQueued) = inbox()
        flood.occurred(turnedAway)
        if waiting.isEmpty && stillQueued == 0 { flood.ended() }
    }

    /// The stop: what the inbox turned away is counted, the streak said to end; returns how many waited unanswered.
    mutating func stop(turnedAway: Int) -> Int {
        flood.occurred(turnedAway)
        flood.ended()
        defer { waiting.removeAll() }
        return waiting.count
    }
}
