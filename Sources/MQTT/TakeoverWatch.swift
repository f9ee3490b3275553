import ParkWiseLog

/// Tells a twin device id from an ordinary outage. Two boards configured with one device id log in with one MQTT
/// client id, and a broker gives that client id to whoever connected last (MQTT 3.1.1 §3.1.4, MQTT 5 §3.1.4): each
/// board's connection is taken over by the other's next one, both flap, and all either sees is "The connection was
/// lost.". The evidence: an MQTT 5 DISCONNECT with reason 0x8E "session taken over" (a broker that sends it; mosquitto
/// 2.0.11 closes the socket without it), or, with no reason given, `streak` connections in a row lost within `brief`
/// seconds of the broker accepting them, each reconnect accepted at its first attempt (a broker that restarts refuses
/// connections for a while, and a refused attempt starts the count again; a twin's broker accepts at once and drops
/// the older one: twins flap about once a second each, so six take a few seconds). Said once per streak, with the
/// fix; the streak ends once a connection has lasted `settle` seconds. Owned by the link's thread.
struct TakeoverWatch {
    static let brief = 10.0
    static let streak = 6
    static let settle = 30.0

    let clientID: String
    /// Connections lost in a row within `brief` of being accepted (0 after one that lasted).
    private var briefLosses = 0
    private var firstBriefLoss = 0.0
    /// The streak said in the log: what it says, and how many takeovers since.
    private(set) var conflict: String?
    private var log: LogStreak

    init(clientID: String) {
        self.clientID = clientID
        log = LogStreak(.warn, "another client logs in with this device's id, the broker hands the connection to each in turn",
                        ended: "device id no longer contested, the connection stays up", interval: .infinity)
    }

    /// While a streak lasts, losses are counted in it rather than logged one by one.
    var active: Bool { conflict != nil }

    /// A connection the broker had accepted is lost, after `upFor` seconds; `takenOver`: MQTT 5 reason 0x8E.
    /// Returns the conflict's description when this loss starts a streak.
    mutating func lost(upFor: Double, takenOver: Bool, broker: String, now: Double) -> String? {
        guard takenOver || upFor < Self.brief else {
            briefLosses = 0
            return nil
        }
        if briefLosses == 0 { firstBriefLoss = now }
        briefLosses += 1
        if active {
            log.occurred()
            return nil
        }
        guard takenOver || briefLosses >= Self.streak else { return nil }
        let evidence = takenOver
            ? "the broker said \"session taken over\" (MQTT 5 reason 0x8E)"
            : "\(briefLosses) connections in a row lost within \(Int(Self.brief)) s of being accepted, each reconnect accepted at once"
        let text = "another client uses this device's MQTT client id \(clientID) at \(broker) (\(evidence)): most likely a "
            + "second board configured with the same site and device id; the broker drops the older connection each time "
            + "the other connects, and both boards' events mix under one device"
        conflict = text
        log.occurred(briefLosses, ["client_id": clientID, "broker": broker, "evidence": evidence,
                                   "within_s": Int(now - firstBriefLoss), "fix": Self.fix])
        return text
    }

    /// A connection attempt failed (refused, unreachable, timed out): whatever ended the last connection, the broker
    /// was not there to take a twin's login, so the brief losses so far are no evidence (a streak under way stays).
    mutating func attemptFailed() {
        briefLosses = 0
    }

    /// The connection now up has lasted `upFor` seconds: after `settle` the streak is over. Returns true when it ends.
    mutating func stillUp(for upFor: Double) -> Bool {
        guard active, upFor >= Self.settle else { return false }
        conflict = nil
        briefLosses = 0
        log.ended(["client_id": clientID])
        return true
    }

    /// Seconds until a connection up since `upFor` seconds settles the streak (nil: no streak).
    func untilSettled(upFor: Double) -> Double? {
        active ? max(0, Self.settle - upFor) : nil
    }

    static let fix = "give each board its own device id (device: in /etc/parkwise-agent/agent.yaml) and its own broker "
        + "credentials (username = device id); deploy/mosquitto/README.md says how the broker refuses a second login"
}
