/// The MQTT topic tree of one device (contract v1; later versions extend it, never break it):
///
///     parkwise/v1/<site>/<device>/status              retained; online / offline (last will)
///     parkwise/v1/<site>/<device>/events              QoS 1; one JSON event per message
///     parkwise/v1/<site>/<device>/state/spot/<id>     retained spot state (QoS 0: a snapshot, sent on every connection)
///     parkwise/v1/<site>/<device>/state/level/<id>    retained level state (QoS 0)
///     parkwise/v1/<site>/<device>/cmd/<name>          commands to the device
///     parkwise/v1/<site>/<device>/reply               command results
///     parkwise/v1/<site>/<device>/doctor              `doctor`'s round-trip test message (not retained; ignore it)
///
/// And the site's register, written by the broker host's provisioning only (the ACL's admin role; no device may):
///
///     parkwise/v1/<site>/_register/<device>           retained; the device's spots, or that it is revoked
public struct Topics: Sendable, Hashable {
    public static let root = "parkwise/v1"

    public let site: String
    public let device: String

    /// The device's own subtree, and the topics it publishes on with every event: built once.
    public let prefix: String
    public let events: String

    public init(site: String, device: String) {
        self.site = site
        self.device = device
        prefix = "\(Topics.root)/\(site)/\(device)"
        events = "\(prefix)/events"
    }

    public var status: String { "\(prefix)/status" }
    public var reply: String { "\(prefix)/reply" }
    public var doctor: String { "\(prefix)/doctor" }
    public var commands: String { "\(prefix)/cmd/+" }
    public func spot(_ id: String) -> String { "\(prefix)/state/spot/\(id)" }
    public func level(_ id: String) -> String { "\(prefix)/state/level/\(id)" }
    public func command(_ name: String) -> String { "\(prefix)/cmd/\(name)" }

    /// The register's level: `_` cannot begin a device id, so no device's tree is it.
    public static let registerLevel = "_register"

    /// Where the broker host says which spots `device` may report, or that it is revoked (`RegisterPayload`).
    public static func register(site: String, device: String) -> String { "\(root)/\(site)/\(registerLevel)/\(device)" }

    /// Everything every device of a site publishes (for a monitor or a backend bridge).
    public static func siteFilter(_ site: String?) -> String { "\(root)/\(site ?? "+")/#" }

    /// Splits a received topic into its parts, or nil when it is not in this tree.
    public static func parse(_ topic: String) -> (site: String, device: String, rest: [String])? {
        let parts = topic.split(separator: "/", omittingEmptySubsequences: false).map(String.init)
        guard parts.count >= 5, parts[0] == "parkwise", parts[1] == "v1" else { return nil }
        return (parts[2], parts[3], Array(parts[4...]))
    }
}
