/// What the MQTT link reports to its owner (the agent's session, the bridge's runtime, a probe). `connection` numbers
/// each connection: an acknowledgement only means something on the connection it came from.
public enum LinkEvent: Sendable {
    /// `mqtt5`: the connection speaks MQTT 5 (a refused publish comes back as `refused`); false: 3.1.1, where the
    /// broker acknowledges a publish it drops like any other.
    case connected(broker: String, connection: UInt64, mqtt5: Bool)
    case disconnected(connection: UInt64, reason: String)
    /// The broker acknowledged (PUBACK) the QoS 1 publish with this message id; a QoS 0 publish: it is written whole
    /// to the socket (reported only when `MQTTLink.publish` said `.sent`, not `.written`).
    case acknowledged(mid: Int32, connection: UInt64)
    /// MQTT 5: the broker answered the QoS 1 publish with this message id with a reason code of 0x80 or more (e.g.
    /// 0x87 not authorized: its ACL denies the topic). It did not take the message: nothing was delivered.
    case refused(mid: Int32, connection: UInt64, reason: Int32)
    /// A message on a subscribed topic; `retained`: the broker's stored copy, sent because a subscription was made
    /// (not a message published now); `expiry`: MQTT 5, what is left of its expiry interval, in seconds.
    case message(topic: String, payload: [UInt8], retained: Bool, expiry: UInt32?)
    /// A message larger than `LinkSettings.maximumIncoming`: dropped unread in libmosquitto's callback, before it was
    /// copied or decoded; only its topic and size are kept.
    case oversized(topic: String, bytes: Int, retained: Bool)
    /// Another client keeps taking this connection over (a twin device id, see `TakeoverWatch`): what is known of it;
    /// nil once a connection has lasted again.
    case contested(String?)
}

/// How the link reaches the broker; secrets stay in here and are never logged.
public struct LinkSettings: Sendable {
    public struct Broker: Sendable, CustomStringConvertible {
        public var host: String
        public var port: Int
        public var tls: Bool
        public init(host: String, port: Int, tls: Bool) {
            self.host = host
            self.port = port
            self.tls = tls
        }
        public var description: String { "\(tls ? "mqtts" : "mqtt")://\(host):\(port)" }
    }

    public var brokers: [Broker]
    public var clientID: String
    public var keepaliveSeconds: Int
    /// Published retained by the broker when the link dies without saying goodbye; its payload made for each
    /// connection from its number (the link's count of attempts, as `LinkEvent.connected` gives it).
    public var will: Will?
    public struct Will: Sendable {
        public var topic: String
        public var payload: @Sendable (_ connection: UInt64) -> [UInt8]
        public init(topic: String, payload: @escaping @Sendable (_ connection: UInt64) -> [UInt8]) {
            self.topic = topic
            self.payload = payload
        }
    }
    public var username: String?
    public var password: String?
    /// Topic filters to subscribe to on every connection (QoS 1).
    public var subscriptions: [String]
    /// Subscribed too on an MQTT 3.1.1 connection: the device's own status topic, so that its own publish coming back
    /// is the evidence that the broker takes its publishes (3.1.1 acknowledges a denied one like any other).
    public var echoTopic: String?
    /// QoS 1 messages sent and not yet acknowledged, at most (libmosquitto's default is 20): with a
    /// broker 10 ms away, 20 caps the link at about 2,000 events a second.
    public var inFlightMaximum: Int32 = 100
    /// Reconnect backoff: first delay and cap, in seconds; each delay gets up to 50% random jitter.
    public var backoffFirst: Double = 0.5
    public var backoffCap: Double = 30
    /// For `mqtts` brokers: CA file (nil: the system's CA directory), client certificate and key.
    public var tls: (ca: String?, cert: String?, key: String?)?
    /// 4 (MQTT 3.1.1) or 5.
    public var protocolVersion: Int32 = 4
    /// With `protocolVersion` 5: a broker that refuses MQTT 5 (CONNACK "unsupported protocol version") is asked again
    /// at once with 3.1.1, and kept at 3.1.1 for the rest of the run.
    public var fallsBackTo311 = false
    /// false: a persistent session (the broker keeps the subscriptions and queues QoS 1 messages
    /// for this client id while it is away), as a consumer like the backend bridge needs.
    public var cleanSession = true
    /// What the log says while no broker answers: what happens meanwhile depends on who is linked
    /// (a device keeps events in its outbox; a persistent consumer has the broker queue for it).
    public var unreachableMessage: StaticString = "broker unreachable, events stay in the outbox"
    /// The largest message payload taken from the broker, in bytes (nil: no limit). A larger one is dropped in
    /// libmosquitto's callback before it is copied (`LinkEvent.oversized`). With MQTT 5 the CONNECT also carries a
    /// maximum packet size of this plus `topicRoom`, so the broker never sends a larger packet at all; with 3.1.1 only
    /// the broker's own limit (`max_packet_size`) keeps one out of memory: libmosquitto reads a whole packet, and
    /// copies its payload once more, before the callback sees it.
    public var maximumIncoming: Int?
    /// What a packet holds beside the payload: the fixed header, the topic (a device's `cmd/<name>`), properties.
    public static let topicRoom = 1024

    public init(brokers: [Broker], clientID: String, keepaliveSeconds: Int, will: Will?,
                username: String? = nil, password: String? = nil, subscriptions: [String]) {
        self.brokers = brokers
        self.clientID = clientID
        self.keepaliveSeconds = keepaliveSeconds
        self.will = will
        self.username = username
        self.password = password
        self.subscriptions = subscriptions
    }
}
