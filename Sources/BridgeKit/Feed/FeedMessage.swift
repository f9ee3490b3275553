import ParkWiseContract

/// One device of one site, as its topics name it.
struct DeviceKey: Hashable, Sendable, CustomStringConvertible {
    var site: String
    var device: String
    var description: String { "\(site)/\(device)" }
}

/// A message of the agents' feed, decoded. Anything else on the tree (replies, commands, topics a
/// later contract adds, cleared retained topics) is `.ignored`: a consumer ignores what it does not know.
enum FeedMessage: Sendable {
    case status(DeviceKey, StatusPayload)
    case event(DeviceKey, EventPayload, json: String)
    case spot(DeviceKey, id: String, SpotStatePayload)
    case level(DeviceKey, id: String, LevelStatePayload)
    /// The site's register entry of the device (its key): the spots it may report, or that it is revoked.
    case register(DeviceKey, RegisterPayload)
    case ignored
    /// On a topic it should understand, but the payload does not decode.
    case malformed(topic: String)

    static func decode(topic: String, payload: [UInt8]) -> FeedMessage {
        guard let (site, device, rest) = Topics.parse(topic), !payload.isEmpty else { return .ignored }
        if device == Topics.registerLevel {
            guard rest.count == 1, !rest[0].isEmpty else { return .ignored }
            guard let entry = WireJSON.decode(RegisterPayload.self, from: payload),
                  ["provisioned", "revoked"].contains(entry.state) else { return .malformed(topic: topic) }
            return .register(DeviceKey(site: site, device: rest[0]), entry)
        }
        let key = DeviceKey(site: site, device: device)
        switch rest.count == 3 ? [rest[0], rest[1]] : rest {
        case ["status"]:
            // Its boot goes to the device's cursor (a bigint), written for the whole batch: one that does not fit
            // would be refused there, where no message is blamed (an event's boot and seq are refused with the event).
            guard let status = WireJSON.decode(StatusPayload.self, from: payload), (status.boot ?? 0) <= UInt64(Int64.max)
            else { return .malformed(topic: topic) }
            return .status(key, status)
        case ["events"]:
            guard let event = WireJSON.decode(EventPayload.self, from: payload) else { return .malformed(topic: topic) }
            return .event(key, event, json: String(decoding: payload, as: UTF8.self))
        case ["state", "spot"]:
            return WireJSON.decode(SpotStatePayload.self, from: payload).map { .spot(key, id: rest[2], $0) }
                ?? .malformed(topic: topic)
        case ["state", "level"]:
            return WireJSON.decode(LevelStatePayload.self, from: payload).map { .level(key, id: rest[2], $0) }
                ?? .malformed(topic: topic)
        default:
            return .ignored
        }
    }

    var device: DeviceKey? {
        switch self {
        case .status(let key, _), .event(let key, _, _), .spot(let key, _, _), .level(let key, _, _), .register(let key, _):
            return key
        case .ignored, .malformed: return nil
        }
    }
}
