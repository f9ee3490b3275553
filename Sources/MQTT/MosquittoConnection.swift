import CMosquitto
import Synchronization

/// One connection attempt to one broker: the single owner of a `struct mosquitto`. A new one is
/// made for every attempt, so nothing of an old connection (its in-flight queue, its message ids)
/// survives into the next; the outbox decides what is sent again.
///
/// Sendable by contract: the link's thread runs the network loop, publishers hold the link's lock, and the
/// handle is freed only under that lock. Without TLS a publish writes to the socket from the publishing thread
/// (libmosquitto serialises writes with its own mutexes; a kernel socket takes a send beside a receive): the
/// event leaves without a hop to the link's thread. With TLS one SSL object must not read and write on two
/// threads at once, so libmosquitto is told it runs threaded (`mosquitto_threaded_set`): a publish only queues
/// and the link's thread, woken, writes it.
package final class MosquittoConnection: @unchecked Sendable {
    private let handle: OpaquePointer
    private let context: Unmanaged<CallbackContext>
    let broker: LinkSettings.Broker
    let number: UInt64
    /// MQTT 5 with a limit on what the broker sends: the CONNECT carries the maximum packet size.
    private let maximumPacket: UInt32?
    /// The connection speaks MQTT 5: a publish may carry properties.
    private let mqtt5: Bool

    /// What the callbacks may touch: the events they report (taken by the link's thread after each round of
    /// reading and writing, and handed on together) and the CONNACK result, nothing else.
    final class CallbackContext: Sendable {
        let number: UInt64
        let broker: String
        let events = Mutex<[LinkEvent]>([])
        /// -1 until CONNACK; then the CONNACK code (0 accepted).
        let connack = Atomic<Int32>(-1)
        let received = Atomic<UInt64>(0)
        /// Where a broker probe's callbacks report at once (nil for the link, whose events wait in `events`).
        let direct: (@Sendable (LinkEvent) -> Void)?
        /// A broker probe's record of acknowledgements and library errors; nil for the link.
        let recorder: ProbeRecorder?
        /// A message with a longer payload is dropped unread (`LinkEvent.oversized`).
        let maximumIncoming: Int
        /// The reason code of an MQTT 5 DISCONNECT the broker sent (-1: none came).
        let disconnectReason = Atomic<Int32>(-1)

        init(number: UInt64, broker: String, emit: (@Sendable (LinkEvent) -> Void)? = nil, recorder: ProbeRecorder? = nil,
             maximumIncoming: Int? = nil) {
            self.number = number
            self.broker = broker
            self.direct = emit
            self.recorder = recorder
            self.maximumIncoming = maximumIncoming ?? Int.max
        }

        func emit(_ event: LinkEvent) {
            if let direct { direct(event) } else { events.withLock { $0.append(event) } }
        }
    }

    static let libraryReady: Bool = {
        mosquitto_lib_init() == MOSQ_ERR_SUCCESS.rawValue
    }()

    private init(handle: OpaquePointer, context: Unmanaged<CallbackContext>, broker: LinkSettings.Broker, number: UInt64,
                 maximumPacket: UInt32?, mqtt5: Bool) {
        self.handle = handle
        self.context = context
        self.broker = broker
        self.number = number
        self.maximumPacket = maximumPacket
        self.mqtt5 = mqtt5
    }

    deinit {
        mosquitto_destroy(handle)
        context.release()
    }

    static func make(settings: LinkSettings, broker: LinkSettings.Broker, number: UInt64,
                     emit: (@Sendable (LinkEvent) -> Void)? = nil,
                     recorder: ProbeRecorder? = nil) throws(MQTTError) -> MosquittoConnection {
        guard libraryReady else { throw MQTTError("libmosquitto failed to initialise") }
        let context = Unmanaged.passRetained(CallbackContext(number: number, broker: broker.description, emit: emit,
                                                             recorder: recorder, maximumIncoming: settings.maximumIncoming))
        guard let handle = mosquitto_new(settings.clientID, settings.cleanSession, context.toOpaque()) else {
            context.release()
            throw MQTTError("cannot create an MQTT client (out of memory?)")
        }
        let maximumPacket = settings.protocolVersion == 5
            ? settings.maximumIncoming.map { UInt32(clamping: $0 + LinkSettings.topicRoom) } : nil
        let connection = MosquittoConnection(handle: handle, context: context, broker: broker, number: number,
                                             maximumPacket: maximumPacket, mqtt5: settings.protocolVersion == 5)
        mosquitto_threaded_set(handle, broker.tls)
        _ = mosquitto_int_option(handle, MOSQ_OPT_PROTOCOL_VERSION,
                                 settings.protocolVersion == 5 ? MQTT_PROTOCOL_V5 : MQTT_PROTOCOL_V311)
        _ = mosquitto_int_option(handle, MOSQ_OPT_SEND_MAXIMUM, settings.inFlightMaximum)
        // Every publish is one small packet written at once: with Nagle's algorithm a packet that follows one the broker
        // does not answer (a QoS 0 state) waits for the broker's delayed ACK, up to 40 ms (issue 37: the edge after a
        // paced state publish was that late at p99).
        _ = mosquitto_int_option(handle, MOSQ_OPT_TCP_NODELAY, 1)
        mosquitto_connect_callback_set(handle, onConnect)
        mosquitto_disconnect_v5_callback_set(handle, onDisconnect)
        // (The v5 callback is called for MQTT 3.1.1 too, with reason 0: a 3.1.1 PUBACK carries none.)
        mosquitto_publish_v5_callback_set(handle, onPublish)
        // (Also called for MQTT 3.1.1, without properties.)
        mosquitto_message_v5_callback_set(handle, onMessage)
        if recorder != nil {
            mosquitto_subscribe_callback_set(handle, onSubscribe)
            mosquitto_log_callback_set(handle, onLog)
        }
        if let will = settings.will {
            try check(will.payload(number).withUnsafeBytes {
                mosquitto_will_set(handle, will.topic, Int32($0.count), $0.baseAddress, 1, true)
            }, "setting the last will")
        }
        if broker.tls {
            let files = settings.tls ?? (nil, nil, nil)
            try check(mosquitto_tls_set(handle, files.ca, files.ca == nil ? "/etc/ssl/certs" : nil, files.cert, files.key, nil),
                      "setting up TLS (check the CA, certificate and key files)")
            // Verify the broker's certificate and host name; TLS 1.2 at least.
            try check(mosquitto_tls_opts_set(handle, 1, "tlsv1.2", nil), "setting TLS options")
        }
        if let user = settings.username {
            try check(mosquitto_username_pw_set(handle, user, settings.password), "setting credentials")
        }
        return connection
    }

    /// Starts a non-blocking connect; the network loop completes it. With MQTT 5 and a limit on what the broker may
    /// send, the CONNECT carries it (maximum packet size): libmosquitto 2.0 takes CONNECT properties only in its
    /// blocking connect, whose TCP connect waits for the kernel's SYN retries (about 2 minutes) on a broker that drops
    /// packets, so the link first proves the broker answers (`MQTTLink.unreachable(_:within:)`, bounded); the rest (TLS, CONNACK)
    /// goes on in the network loop as usual.
    func connect(keepalive: Int) -> Int32 {
        guard let maximumPacket else { return mosquitto_connect_async(handle, broker.host, Int32(broker.port), Int32(keepalive)) }
        var properties: OpaquePointer?
        defer { mosquitto_property_free_all(&properties) }
        let rc = mosquitto_property_add_int32(&properties, Int32(MQTT_PROP_MAXIMUM_PACKET_SIZE.rawValue), maximumPacket)
        guard rc == MOSQ_ERR_SUCCESS.rawValue else { return rc }
        return mosquitto_connect_bind_v5(handle, broker.host, Int32(broker.port), Int32(keepalive), nil, properties)
    }

    /// Whether the CONNECT is made by the blocking call (see `connect`).
    var connectsBlocking: Bool { maximumPacket != nil }

    /// The reason code of the MQTT 5 DISCONNECT the broker sent, if one came.
    var disconnectReason: Int32? {
        let code = context.takeUnretainedValue().disconnectReason.load(ordering: .acquiring)
        return code >= 0 ? code : nil
    }

    /// Runs the network for up to `timeoutMs`: reads, writes, keepalive, callbacks.
    func loop(timeoutMs: Int32) -> Int32 { mosquitto_loop(handle, timeoutMs, 1) }

    /// The socket to poll (-1 when there is none).
    var socket: Int32 { mosquitto_socket(handle) }

    /// Reads what the socket holds (callbacks run here). Nonzero: the connection is gone.
    func loopRead() -> Int32 { mosquitto_loop_read(handle, 1) }

    /// Writes what is queued, as far as the socket takes it.
    func loopWrite() -> Int32 { mosquitto_loop_write(handle, 1) }

    /// Keepalive: a PINGREQ when due, or the end of a connection whose PINGRESP never came.
    func loopMisc() -> Int32 { mosquitto_loop_misc(handle) }

    /// What the callbacks reported since the last call (PUBACKs, messages), oldest first.
    func takeEvents() -> [LinkEvent] {
        context.takeUnretainedValue().events.withLock { events in
            defer { events.removeAll(keepingCapacity: true) }
            return events
        }
    }

    /// Publishes received so far (a QoS 1 publish is answered with a PUBACK written while reading).
    var received: UInt64 { context.takeUnretainedValue().received.load(ordering: .acquiring) }

    var connack: Int32 { context.takeUnretainedValue().connack.load(ordering: .acquiring) }

    /// Publishes with QoS 1 or 0; returns the message id reported once the broker acknowledged it (QoS 1: its PUBACK)
    /// or, QoS 0, once it is written whole to the socket. `written`: a QoS 0 message already was (nothing is reported
    /// for it then: the callback fired inside the call and its report is taken back).
    /// `expiry`: with MQTT 5, the message's expiry interval in seconds (the broker hands a retained copy on with what
    /// is left of it, so a reader learns its age by the broker's clock); ignored over 3.1.1.
    func publish(topic: String, payload: [UInt8], qos: Int32 = 1, retain: Bool,
                 expiry: UInt32? = nil) -> (rc: Int32, mid: Int32, written: Bool) {
        var mid: Int32 = 0
        var properties: OpaquePointer?
        defer { mosquitto_property_free_all(&properties) }
        if let expiry, mqtt5 {
            let rc = mosquitto_property_add_int32(&properties, Int32(MQTT_PROP_MESSAGE_EXPIRY_INTERVAL.rawValue), expiry)
            guard rc == MOSQ_ERR_SUCCESS.rawValue else { return (rc, 0, false) }
        }
        let rc = payload.withUnsafeBytes {
            mosquitto_publish_v5(handle, &mid, topic, Int32($0.count), $0.baseAddress, qos, retain, properties)
        }
        guard rc == MOSQ_ERR_SUCCESS.rawValue, qos == 0, !wantsWrite else { return (rc, mid, false) }
        context.takeUnretainedValue().events.withLock { events in
            if let own = events.lastIndex(where: { if case .acknowledged(mid, _) = $0 { true } else { false } }) {
                events.remove(at: own)
            }
        }
        return (rc, mid, true)
    }

    /// Whether the callbacks reported something not taken yet (a publish can write what an earlier one queued).
    var hasEvents: Bool { context.takeUnretainedValue().events.withLock { !$0.isEmpty } }

    func subscribe(_ filter: String, qos: Int32) -> Int32 { mosquitto_subscribe(handle, nil, filter, qos) }

    /// QoS 1 subscription; returns the message id whose SUBACK a probe's recorder keeps.
    func subscribeCounted(_ filter: String) -> (rc: Int32, mid: Int32) {
        var mid: Int32 = 0
        let rc = mosquitto_subscribe(handle, &mid, filter, 1)
        return (rc, mid)
    }

    func disconnect() { _ = mosquitto_disconnect(handle) }

    var wantsWrite: Bool { mosquitto_want_write(handle) }

    private static func check(_ rc: Int32, _ what: String) throws(MQTTError) {
        guard rc == MOSQ_ERR_SUCCESS.rawValue else { throw MQTTError("\(what): \(describe(rc))", code: rc) }
    }

    static func describe(_ rc: Int32) -> String { String(cString: mosquitto_strerror(rc)) }
    static func describeConnack(_ code: Int32) -> String { String(cString: mosquitto_connack_string(code)) }
    /// An MQTT 5 reason code (CONNACK, PUBACK, SUBACK) in words.
    package static func describeReason(_ code: Int32) -> String { String(cString: mosquitto_reason_string(code)) }
}

// C callbacks: file-scope, context through the user-data pointer, touching only the context.

private func context(_ obj: UnsafeMutableRawPointer?) -> MosquittoConnection.CallbackContext {
    Unmanaged<MosquittoConnection.CallbackContext>.fromOpaque(obj!).takeUnretainedValue()
}

private func onConnect(_ mosq: OpaquePointer?, _ obj: UnsafeMutableRawPointer?, _ rc: Int32) {
    let ctx = context(obj)
    ctx.connack.store(rc, ordering: .releasing)
}

/// The network loop notices the lost connection through its return code (or its closed socket) and reports it once;
/// this keeps only the reason code of a DISCONNECT the broker sent (MQTT 5), e.g. 0x8E session taken over. libmosquitto
/// passes its own error codes (below 0x80) for a connection that just ended.
private func onDisconnect(_ mosq: OpaquePointer?, _ obj: UnsafeMutableRawPointer?, _ rc: Int32,
                          _ props: OpaquePointer?) {
    guard rc >= 0x80 else { return }
    context(obj).disconnectReason.store(rc, ordering: .releasing)
}

/// QoS 1: the PUBACK came, with its reason code (MQTT 5; 0 otherwise): 0x80 or more is a refusal, not a delivery.
/// QoS 0: the message is written whole to the socket (reason 0).
private func onPublish(_ mosq: OpaquePointer?, _ obj: UnsafeMutableRawPointer?, _ mid: Int32, _ reason: Int32,
                       _ props: OpaquePointer?) {
    let ctx = context(obj)
    ctx.recorder?.puback(mid: mid, reason: reason)
    ctx.emit(reason >= 0x80 ? .refused(mid: mid, connection: ctx.number, reason: reason)
                            : .acknowledged(mid: mid, connection: ctx.number))
}

private func onMessage(_ mosq: OpaquePointer?, _ obj: UnsafeMutableRawPointer?, _ message: UnsafePointer<mosquitto_message>?,
                       _ properties: OpaquePointer?) {
    guard let message = message?.pointee, let topic = message.topic else { return }
    let ctx = context(obj)
    ctx.received.add(1, ordering: .releasing)
    // Over the limit: nothing of the payload is copied (libmosquitto frees its own copy when this returns).
    guard Int(message.payloadlen) <= ctx.maximumIncoming else {
        return ctx.emit(.oversized(topic: String(cString: topic), bytes: Int(message.payloadlen), retained: message.retain))
    }
    let payload = message.payloadlen > 0 && message.payload != nil
        ? Array(UnsafeRawBufferPointer(start: message.payload, count: Int(message.payloadlen))) : []
    var expiry: UInt32 = 0
    let hasExpiry = mosquitto_property_read_int32(properties, Int32(MQTT_PROP_MESSAGE_EXPIRY_INTERVAL.rawValue), &expiry, false) != nil
    ctx.emit(.message(topic: String(cString: topic), payload: payload, retained: message.retain, expiry: hasExpiry ? expiry : nil))
}

// A broker probe's callbacks: they only write into the recorder (lock-protected).

private func onSubscribe(_ mosq: OpaquePointer?, _ obj: UnsafeMutableRawPointer?, _ mid: Int32, _ count: Int32,
                         _ granted: UnsafePointer<Int32>?) {
    let codes = granted.map { Array(UnsafeBufferPointer(start: $0, count: Int(count))) } ?? []
    context(obj).recorder?.suback(mid: mid, granted: codes)
}

private func onLog(_ mosq: OpaquePointer?, _ obj: UnsafeMutableRawPointer?, _ level: Int32, _ text: UnsafePointer<CChar>?) {
    guard level & (MOSQ_LOG_ERR | MOSQ_LOG_WARNING) != 0, let text else { return }
    context(obj).recorder?.log(String(cString: text))
}
