/// Turns a parsed config document into an `AgentConfig`, collecting every issue instead of stopping
/// at the first: an installer fixes a file in one pass.
public struct ConfigReader {
    public let file: String
    private(set) var issues: [ConfigIssue] = []
    /// Every input read, even of lanes and spots rejected for other reasons, to find lines used twice.
    private(set) var inputsSeen: [InputConfig] = []
    /// Hints that name every level, built once per wrong name: a city's file that repeats one wrong level on
    /// thousands of spots would otherwise compare it with each level, and sort and join them all, at every spot.
    private var levelHints: [LevelHintKey: String] = [:]
    private var sortedLevelIDs: [String]?

    private enum LevelHintKey: Hashable {
        /// `did you mean …? known: …` for a wrong level name.
        case unknown(String, withOutside: Bool)
        /// The ids joined.
        case known(withOutside: Bool)
        /// For a spot id that starts with no level.
        case idWithoutLevel
    }

    /// `walk-test --learn`: a spot whose input is `UNSET` is kept aside in `unsetSpots` instead of being an issue.
    private var learning = false
    private(set) var unsetSpots: [UnsetSpot] = []

    public init(file: String) { self.file = file }

    /// Reads and validates; throws `ConfigError` listing every problem, in file order.
    public static func read(_ root: ConfigNode, file: String) throws(ConfigError) -> AgentConfig {
        try read(root, file: file, learning: false).config
    }

    /// `read` for `walk-test --learn`: spots whose input is `UNSET` are left out of the config and returned, in file
    /// order, for the installer to wire by walking; every other problem is an issue as usual.
    public static func readForLearning(_ root: ConfigNode, file: String) throws(ConfigError) -> (config: AgentConfig, unset: [UnsetSpot]) {
        try read(root, file: file, learning: true)
    }

    private static func read(_ root: ConfigNode, file: String, learning: Bool) throws(ConfigError) -> (config: AgentConfig, unset: [UnsetSpot]) {
        var reader = ConfigReader(file: file)
        reader.learning = learning
        let config = reader.readRoot(root)
        if let config, reader.issues.isEmpty { return (config, reader.unsetSpots) }
        if reader.issues.isEmpty {
            reader.report(root.mark, "the config could not be read",
                          hint: "it must be a YAML mapping with site, device, levels and spots or lanes (see hardware/examples)")
        }
        throw ConfigError(reader.issues.sorted { ($0.mark.line, $0.mark.column) < ($1.mark.line, $1.mark.column) })
    }

    mutating func report(_ mark: Mark, _ message: String, hint: String? = nil) {
        issues.append(ConfigIssue(file: file, mark: mark, message: message, hint: hint))
    }

    // MARK: - Top level

    static let boards = ["simulated", "auto", "raspberry-pi-3", "raspberry-pi-zero-2-w", "raspberry-pi-4",
                         "raspberry-pi-400", "raspberry-pi-cm4", "raspberry-pi-5", "raspberry-pi-cm5"]

    private mutating func readRoot(_ root: ConfigNode) -> AgentConfig? {
        guard let top = mapping(root, keys: ["site", "device", "mqtt", "outbox", "board", "spot_id_pattern",
                                             "levels", "lanes", "spots"], in: "the config file") else { return nil }
        let site = topicName(top.required("site", &self), what: "site")
        let device = topicName(top.required("device", &self), what: "device")
        let mqtt = readMQTT(top["mqtt"], parent: root)
        let outbox = readOutbox(top["outbox"])
        let board = readBoard(top["board"])
        let pattern = top["spot_id_pattern"].flatMap { readPattern($0) }
        // Every level named, even one rejected for its capacity: what sits on it is not on an unknown level.
        let (levels, levelIDs) = readLevels(top.required("levels", &self))
        var lanes = list(top["lanes"], what: "lanes").compactMap { readLane($0, levelIDs: levelIDs) }
        var spots = list(top["spots"], what: "spots").compactMap { readSpot($0, levelIDs: levelIDs, pattern: pattern) }
        lanes = unique(lanes, id: \.id, mark: \.mark, what: "lane")
        spots = unique(spots, id: \.id, mark: \.mark, what: "spot")
        checkCapacities(levels: levels, spots: spots)
        checkInputsUsedOnce()
        checkBoardLines(board: board)
        if lanes.isEmpty && spots.isEmpty && top["lanes"] == nil && top["spots"] == nil {
            report(root.mark, "nothing to watch: the config has no lanes and no spots",
                   hint: "add a `lanes:` list (gate loops) or a `spots:` list (presence sensors)")
        }
        guard let site, let device, let mqtt, let board else { return nil }
        return AgentConfig(site: site, device: device, mqtt: mqtt, outbox: outbox, board: board,
                           spotIDPattern: pattern?.text, levels: levels, lanes: lanes, spots: spots)
    }

    private mutating func readMQTT(_ node: ConfigNode?, parent: ConfigNode) -> MQTTSettings? {
        guard let node else {
            var settings = MQTTSettings(brokers: [BrokerAddress(tls: false, host: "127.0.0.1", port: 1883)],
                                        credentialsPath: nil, keepalive: ConfigDefaults.keepalive, tls: nil, protocolVersion: 5)
            settings.fallsBackTo311 = true
            return settings
        }
        guard let map = mapping(node, keys: ["brokers", "credentials", "keepalive", "tls", "protocol", "status_every"],
                                in: "mqtt") else { return nil }
        var brokers: [BrokerAddress] = []
        var brokersRead = true
        if let list = map["brokers"] {
            let items = self.list(list, what: "mqtt.brokers")
            for item in items {
                guard let text = string(item, what: "a broker address") else { continue }
                if let broker = BrokerAddress.parse(text) { brokers.append(broker) } else {
                    brokersRead = false
                    report(item.mark, "'\(text)' is not a broker address",
                           hint: text.contains("@")
                               ? "write mqtt://HOST:PORT without a user name or password: they go in the file mqtt.credentials names"
                               : "write mqtt://HOST:PORT, or mqtts://HOST:PORT for TLS (e.g. mqtt://10.0.0.5:1883)")
                }
            }
            if items.isEmpty && !list.isCollectionOfOtherKind {
                report(list.mark, "mqtt.brokers is empty", hint: "list at least one broker, e.g. [\"mqtt://127.0.0.1:1883\"]")
            }
        } else {
            brokers = [BrokerAddress(tls: false, host: "127.0.0.1", port: 1883)]
        }
        var files: [LinkFile] = []
        func file(_ node: ConfigNode?, _ role: LinkFile.Role) -> String? {
            guard let node, let path = string(node, what: "a file path") else { return nil }
            files.append(LinkFile(role: role, path: path, mark: node.mark))
            return path
        }
        let credentials = file(map["credentials"], .credentials)
        let keepalive = map["keepalive"].flatMap { duration($0, key: "keepalive") } ?? ConfigDefaults.keepalive
        if let k = map["keepalive"], keepalive < .seconds(5) || keepalive > .seconds(3600) {
            report(k.mark, "keepalive must be between 5s and 1h", hint: "30s suits most networks")
        }
        let statusEvery = map["status_every"].flatMap { duration($0, key: "status_every") } ?? ConfigDefaults.statusEvery
        if let e = map["status_every"], statusEvery < .seconds(1) || statusEvery > .seconds(3600) {
            report(e.mark, "status_every must be between 1s and 1h",
                   hint: "1m (the default) keeps the retained status fresh without chatter")
        }
        var tls: TLSFiles?
        if let t = map["tls"], let tm = mapping(t, keys: ["ca", "cert", "key"], in: "mqtt.tls") {
            let tlsFiles = TLSFiles(ca: file(tm["ca"], .ca), cert: file(tm["cert"], .cert), key: file(tm["key"], .key))
            if (tlsFiles.cert == nil) != (tlsFiles.key == nil) {
                report(t.mark, "mqtt.tls needs both cert and key for a client certificate",
                       hint: "give cert: and key: together, or neither (server-verified TLS only)")
            }
            if brokersRead && !brokers.contains(where: \.tls) {
                report(t.mark, "mqtt.tls is set but no broker uses mqtts://",
                       hint: "write the brokers as mqtts://HOST:8883")
            }
            tls = tlsFiles
        }
        // Unset: MQTT 5 (a publish the broker refuses says so), 3.1.1 with a broker that refuses 5.
        var protocolVersion = 5
        var fallsBack = true
        if let p = map["protocol"], let text = string(p, what: "an MQTT version") {
            fallsBack = false
            switch text {
            case "3.1.1": protocolVersion = 4
            case "5", "5.0": protocolVersion = 5
            default: report(p.mark, "unknown MQTT protocol '\(text)'",
                            hint: "use \"5\" or \"3.1.1\", or leave it out (5, or 3.1.1 with a broker that refuses 5)")
            }
        }
        var settings = MQTTSettings(brokers: brokers, credentialsPath: credentials, keepalive: keepalive, tls: tls,
                                    protocolVersion: protocolVersion, files: files)
        settings.fallsBackTo311 = fallsBack
        settings.statusEvery = statusEvery
        return settings
    }

    private mutating func readOutbox(_ node: ConfigNode?) -> OutboxSettings {
        var settings = OutboxSettings(path: ConfigDefaults.outboxPath, capacity: ConfigDefaults.outboxCapacity)
        guard let node, let map = mapping(node, keys: ["path", "capacity"], in: "outbox") else { return settings }
        if let p = map["path"], let path = string(p, what: "a directory path") {
            settings.path = path
            settings.pathMark = p.mark
        }
        if let c = map["capacity"],
           let capacity = int(c, what: "outbox.capacity", in: 1...100_000, hint: "200 holds hours of a busy level") {
            settings.capacity = capacity
            settings.capacityMark = c.mark
        }
        return settings
    }

    private mutating func readBoard(_ node: ConfigNode?) -> BoardChoice? {
        guard let node else { return .auto }
        guard let name = string(node, what: "a board name") else { return nil }
        switch name {
        case "simulated": return .simulated
        case "auto": return .auto
        case _ where Self.boards.contains(name): return .named(name)
        default:
            report(node.mark, "unknown board '\(name)'",
                   hint: suggestion(for: name, among: Self.boards).map { "did you mean '\($0)'? " } ?? ""
                       + "boards: \(Self.boards.joined(separator: ", "))")
            return nil
        }
    }

    private mutating func readPattern(_ node: ConfigNode) -> SpotIDPattern? {
        guard let text = string(node, what: "a spot id pattern") else { return nil }
        guard let pattern = SpotIDPattern(text) else {
            report(node.mark, "'\(text)' is not a spot id pattern",
                   hint: "use placeholders <level>, <zone>, <n>, <nn>, e.g. \"<level>-<zone>-<nn>\"")
            return nil
        }
        return pattern
    }

    // MARK: - Levels, lanes, spots

    private mutating func readLevels(_ node: ConfigNode?) -> (levels: [LevelConfig], named: Set<String>) {
        guard let node else { return ([], []) }
        let items = list(node, what: "levels")
        if items.isEmpty && !node.isCollectionOfOtherKind {
            report(node.mark, "levels is empty", hint: "list each level, e.g. - { id: P1, capacity: 60 }")
        }
        var named: Set<String> = []
        let levels: [LevelConfig] = items.compactMap { item in
            guard let map = mapping(item, keys: ["id", "capacity", "name"], in: "a level") else { return nil }
            if let text = map["id"]?.text { named.insert(text) }
            let id = topicName(map.required("id", &self), what: "level id")
            let capacity = map.required("capacity", &self).flatMap {
                int($0, what: "capacity", in: 1...100_000, hint: "the number of parking spaces on the level")
            }
            if let n = map["name"] { _ = string(n, what: "a display name") }
            guard let id, let capacity else { return nil }
            if id == "outside" { report(item.mark, "'outside' is reserved for the area outside the garage", hint: "name levels like P1, P2") }
            return LevelConfig(id: id, capacity: capacity, mark: item.mark)
        }
        return (unique(levels, id: \.id, mark: \.mark, what: "level"), named)
    }

    private mutating func readLane(_ node: ConfigNode, levelIDs: Set<String>) -> LaneConfig? {
        guard let map = mapping(node, keys: ["id", "from", "to", "loops", "min_presence", "max_presence"] + Self.inputKeys,
                                in: "a lane") else { return nil }
        let id = topicName(map.required("id", &self), what: "lane id")
        let from = map.required("from", &self).flatMap { area($0, levelIDs: levelIDs) }
        let to = map.required("to", &self).flatMap { area($0, levelIDs: levelIDs) }
        if let from, let to, from == to, let t = map["to"] {
            report(t.mark, "lane goes from '\(from)' to itself", hint: "a lane connects two different areas (outside or levels)")
        }
        let owner = "lane \(id ?? "?")"
        // nil: written but not a duration (reported), so not compared either.
        let minPresence = map["min_presence"].map { duration($0, key: "min_presence") } ?? ConfigDefaults.minPresence
        let maxPresence = map["max_presence"].map { duration($0, key: "max_presence") } ?? ConfigDefaults.maxPresence
        if let minPresence, let maxPresence, let m = map["max_presence"] ?? map["min_presence"], maxPresence <= minPresence {
            report(m.mark, "max_presence (\(DurationText.format(maxPresence))) must be longer than min_presence (\(DurationText.format(minPresence)))",
                   hint: "min_presence is the shortest stay that is a car, e.g. 400ms; max_presence how long a loop may stay occupied before it counts as stuck, e.g. 2m")
        }
        let shared = inputSettings(map, base: InputSettings(
            delayedOn: ConfigDefaults.loopDelayedOn, delayedOff: ConfigDefaults.loopDelayedOff, settle: nil,
            activeLow: false, bias: .asIs, stuckAfter: maxPresence ?? ConfigDefaults.maxPresence,
            chatterLimit: ConfigDefaults.loopChatterLimit,
            recoverAfter: ConfigDefaults.recoverAfter))
        var loopA: InputConfig?, loopB: InputConfig?
        if let loops = map.required("loops", &self), let lm = mapping(loops, keys: ["a", "b"], in: "loops") {
            loopA = lm.required("a", &self).flatMap { loopInput($0, shared: shared, owner: "\(owner) loop a") }
            loopB = lm.required("b", &self).flatMap { loopInput($0, shared: shared, owner: "\(owner) loop b") }
        }
        guard let id, let from, let to, let loopA, let loopB, let minPresence, let maxPresence else { return nil }
        return LaneConfig(id: id, from: from, to: to, loopA: loopA, loopB: loopB,
                          minPresence: minPresence, maxPresence: maxPresence, mark: node.mark)
    }

    private mutating func loopInput(_ node: ConfigNode, shared: InputSettings, owner: String) -> InputConfig? {
        if case .mapping = node.value {
            guard let map = mapping(node, keys: ["input"] + Self.inputKeys, in: "a loop") else { return nil }
            let own = inputSettings(map, base: shared)
            return map.required("input", &self).flatMap { input($0, settings: own, owner: owner) }
        }
        return input(node, settings: shared, owner: owner)
    }

    private mutating func readSpot(_ node: ConfigNode, levelIDs: Set<String>, pattern: SpotIDPattern?) -> SpotConfig? {
        guard let map = mapping(node, keys: ["id", "input", "level", "checkin_after", "stuck_after"] + Self.inputKeys,
                                in: "a spot") else { return nil }
        guard let idNode = map.required("id", &self), let id = topicName(idNode, what: "spot id") else { return nil }
        var level: String?
        if let l = map["level"] {
            level = string(l, what: "a level id")
            if let name = level, !levelIDs.contains(name) {
                report(l.mark, "spot \(id) is on unknown level '\(name)'", hint: levelHint(name, levelIDs, withOutside: false))
                level = nil
            }
        } else {
            let prefix = String(id.prefix(while: { $0 != "-" }))
            if levelIDs.contains(prefix) { level = prefix } else if !levelIDs.isEmpty {
                report(idNode.mark, "spot \(id) names no known level",
                       hint: idWithoutLevelHint(levelIDs))
            }
        }
        if let pattern, let level, !pattern.matches(id, level: level) {
            report(idNode.mark, "spot id '\(id)' does not match spot_id_pattern \"\(pattern.text)\"",
                   hint: "rename it to follow the pattern, e.g. \(pattern.example(level: level))")
        }
        var settings = inputSettings(map, base: InputSettings(
            delayedOn: ConfigDefaults.spotDelayedOn, delayedOff: ConfigDefaults.spotDelayedOff, settle: nil,
            activeLow: false, bias: .asIs, stuckAfter: ConfigDefaults.spotStuckAfter,
            chatterLimit: ConfigDefaults.spotChatterLimit, recoverAfter: ConfigDefaults.recoverAfter))
        if let n = map["stuck_after"], let d = duration(n, key: "stuck_after") { settings.stuckAfter = d == .zero ? nil : d }
        let inputNode = map.required("input", &self)
        if learning, let node = inputNode, node.text?.trimmingSpaces == ConfigDefaults.inputNotSet {
            if let level {
                unsetSpots.append(UnsetSpot(id: id, level: level, mark: node.mark, delayedOn: settings.delayedOn,
                                            activeLow: map["active_low"] == nil ? nil : settings.activeLow))
            }
            return nil
        }
        let input = inputNode.flatMap { self.input($0, settings: settings, owner: "spot \(id)") }
        let checkin = map["checkin_after"].flatMap { duration($0, key: "checkin_after") } ?? ConfigDefaults.checkinAfter
        guard let level, let input else { return nil }
        return SpotConfig(id: id, level: level, input: input, checkinAfter: checkin, mark: node.mark)
    }

    // MARK: - Inputs

    /// Keys every input takes, on a spot, a lane (for both loops) or one loop.
    static let inputKeys = ["delayed_on", "delayed_off", "delayed_on_off", "settle", "active_low", "bias",
                            "chatter_limit", "recover_after"]

    struct InputSettings {
        var delayedOn: Duration
        var delayedOff: Duration
        var settle: Duration?
        var activeLow: Bool
        var bias: Bias
        var stuckAfter: Duration?
        var chatterLimit: Int
        var recoverAfter: Duration
    }

    private mutating func inputSettings(_ map: MappingNode, base: InputSettings) -> InputSettings {
        var s = base
        if let n = map["delayed_on_off"], let d = duration(n, key: "delayed_on_off") { s.delayedOn = d; s.delayedOff = d }
        if let n = map["delayed_on"], let d = duration(n, key: "delayed_on") { s.delayedOn = d }
        if let n = map["delayed_off"], let d = duration(n, key: "delayed_off") { s.delayedOff = d }
        if let n = map["settle"], let d = duration(n, key: "settle") {
            s.settle = d
            if let other = map["delayed_on"] ?? map["delayed_off"] ?? map["delayed_on_off"] {
                report(other.mark, "settle and delayed_on/delayed_off do not go together",
                       hint: "settle reports a change at once and then waits; delayed_* wait first. Keep one.")
            }
        }
        if let n = map["active_low"], let b = bool(n, what: "active_low") { s.activeLow = b }
        if let n = map["bias"], let text = string(n, what: "a bias") {
            if let bias = Bias(rawValue: text) { s.bias = bias } else {
                report(n.mark, "unknown bias '\(text)'", hint: "use one of: \(Bias.allCases.map(\.rawValue).joined(separator: ", "))")
            }
        }
        if let n = map["chatter_limit"], let limit = int(n, what: "chatter_limit", in: 2...10_000,
                                                          hint: "changes a minute: the most that real traffic makes on this input, with room to spare") {
            s.chatterLimit = limit
        }
        if let n = map["recover_after"], let d = duration(n, key: "recover_after") { s.recoverAfter = d }
        return s
    }

    private mutating func input(_ node: ConfigNode, settings: InputSettings, owner: String) -> InputConfig? {
        if node.isNull || node.text?.trimmingSpaces == ConfigDefaults.inputNotSet {
            report(node.mark, "\(owner): input not set",
                   hint: "write the line its sensor is wired to: GPIO17 (Broadcom name), pin 11 (40-pin header) or CHIP:LINE "
                       + "(e.g. 1-0020:GPA0, an MCP23017 pin); `parkwise-agent lines` lists the board's lines")
            return nil
        }
        guard let text = string(node, what: "an input") else { return nil }
        guard let ref = InputRef.parse(text) else {
            report(node.mark, "'\(text)' is not an input", hint: "write GPIO17 (Broadcom name), pin 11 (40-pin header) or CHIP-LABEL:LINE (e.g. mcp23017:GPA0)")
            return nil
        }
        if case .headerPin(let pin) = ref, InputRef.gpio(ofHeaderPin: pin) == nil {
            report(node.mark, "header pin \(pin) is a power or ground pin, not a GPIO",
                   hint: "use a GPIO pin: 7, 11, 12, 13, 15, 16, 18, 22, 29, 31, 32, 33, 35, 36, 37, 38, 40")
            return nil
        }
        let input = InputConfig(ref: ref, activeLow: settings.activeLow, bias: settings.bias, delayedOn: settings.delayedOn,
                                delayedOff: settings.delayedOff, settle: settings.settle, stuckAfter: settings.stuckAfter,
                                chatterLimit: settings.chatterLimit, recoverAfter: settings.recoverAfter,
                                mark: node.mark, owner: owner)
        inputsSeen.append(input)
        return input
    }

    private mutating func checkInputsUsedOnce() {
        var seen: [String: InputConfig] = [:]
        for input in inputsSeen {
            let key = input.ref.canonical
            if let first = seen[key] {
                report(input.mark, "\(input.owner) uses line \(input.ref) which \(first.owner) already uses (line \(first.mark.line))",
                       hint: "each sensor needs its own line; check the wiring plan")
            } else {
                seen[key] = input
            }
        }
    }

    private mutating func checkCapacities(levels: [LevelConfig], spots: [SpotConfig]) {
        // One pass over the spots, not one per level (500 levels of a city's 60,000 spots: 30 million compares).
        var onLevel: [String: (count: Int, firstInput: Mark)] = [:]
        for spot in spots {
            onLevel[spot.level, default: (0, spot.input.mark)].count += 1
        }
        for level in levels {
            if let (count, firstInput) = onLevel[level.id], count > level.capacity {
                report(firstInput, "level \(level.id) has capacity \(level.capacity) but \(count) spots are configured on it",
                       hint: "raise the level's capacity to at least \(count), or move spots to their real level")
            }
        }
    }

    private mutating func area(_ node: ConfigNode, levelIDs: Set<String>) -> String? {
        guard let name = string(node, what: "an area") else { return nil }
        // Without any level read, the missing levels were reported already.
        if name == "outside" || levelIDs.contains(name) || levelIDs.isEmpty { return name }
        report(node.mark, "lane points at unknown level '\(name)'", hint: levelHint(name, levelIDs, withOutside: true))
        return nil
    }

    /// `did you mean 'P2'? known: P2, outside`. The closest level is looked for in sorted order (then `outside`), so
    /// of equally close ones the hint names the first: in a Set's order it changed from one run to the next.
    /// `levelIDs` are the same at every call of one read.
    private mutating func levelHint(_ name: String, _ levelIDs: Set<String>, withOutside: Bool) -> String {
        let key = LevelHintKey.unknown(name, withOutside: withOutside)
        if let hint = levelHints[key] { return hint }
        let sorted = sortedLevels(levelIDs)
        let hint = (suggestion(for: name, among: withOutside ? sorted + ["outside"] : sorted).map { "did you mean '\($0)'? " } ?? "")
            + "known: \(knownLevels(levelIDs, withOutside: withOutside))"
        levelHints[key] = hint
        return hint
    }

    /// The level ids (and `outside`) sorted and joined, built once per read.
    private mutating func knownLevels(_ levelIDs: Set<String>, withOutside: Bool) -> String {
        let key = LevelHintKey.known(withOutside: withOutside)
        if let text = levelHints[key] { return text }
        let text = (withOutside ? (sortedLevels(levelIDs) + ["outside"]).sorted() : sortedLevels(levelIDs)).joined(separator: ", ")
        levelHints[key] = text
        return text
    }

    private mutating func idWithoutLevelHint(_ levelIDs: Set<String>) -> String {
        if let hint = levelHints[.idWithoutLevel] { return hint }
        let hint = "start the id with its level (e.g. P2-A-01) or add `level:`; levels: \(knownLevels(levelIDs, withOutside: false))"
        levelHints[.idWithoutLevel] = hint
        return hint
    }

    private mutating func sortedLevels(_ levelIDs: Set<String>) -> [String] {
        if let sorted = sortedLevelIDs { return sorted }
        let sorted = levelIDs.sorted()
        sortedLevelIDs = sorted
        return sorted
    }

    // MARK: - Typed values

    mutating func mapping(_ node: ConfigNode, keys: [String], in what: String) -> MappingNode? {
        guard case .mapping(let pairs) = node.value else {
            report(node.mark, "\(what) must be a mapping of keys to values, found \(node.kindName)",
                   hint: "write `key: value` lines indented under it, or { key: value, … } on one line")
            return nil
        }
        var result = MappingNode(mark: node.mark)
        for (keyNode, value) in pairs {
            guard let key = keyNode.text else {
                report(keyNode.mark, "keys must be plain words", hint: "write the key as a word followed by ':', e.g. capacity: 40")
                continue
            }
            if result.values[key] != nil {
                report(keyNode.mark, "'\(key)' is given twice in \(what)", hint: "keep one; YAML would silently use the last")
                continue
            }
            guard keys.contains(key) else {
                let guess = Self.aliases[key].flatMap { keys.contains($0) ? $0 : nil } ?? suggestion(for: key, among: keys)
                report(keyNode.mark, "unknown key '\(key)' in \(what)",
                       hint: guess.map { "did you mean '\($0)'?" } ?? "allowed here: \(keys.joined(separator: ", "))")
                continue
            }
            result.values[key] = value
        }
        return result
    }

    /// Words installers reach for that we spell differently.
    static let aliases = ["buffer": "outbox", "pin": "input", "gpio": "input", "line": "input", "broker": "brokers",
                          "spots_pattern": "spot_id_pattern", "pattern": "spot_id_pattern", "debounce": "delayed_on",
                          "name": "id", "capacity_spots": "capacity", "invert": "active_low", "inverted": "active_low"]

    mutating func list(_ node: ConfigNode?, what: String) -> [ConfigNode] {
        guard let node, !node.isNull else { return [] }
        guard case .sequence(let items) = node.value else {
            report(node.mark, "\(what) must be a list (lines starting with '- '), found \(node.kindName)",
                   hint: "start each item with '- ' on its own line, or write [ item, item ] on one line")
            return []
        }
        return items
    }

    mutating func string(_ node: ConfigNode, what: String) -> String? {
        guard let text = node.text, !node.isNull else {
            report(node.mark, "expected \(what), found \(node.isNull ? "nothing" : node.kindName)",
                   hint: node.isNull ? "write the value after the ':' on the same line" : "write a single value here, not a list or mapping")
            return nil
        }
        return text
    }

    /// A whole number within `range`: every count is bounded, so nothing downstream overflows.
    mutating func int(_ node: ConfigNode, what: String, in range: ClosedRange<Int>, hint: String) -> Int? {
        guard let text = string(node, what: "a whole number") else { return nil }
        guard let n = Int(text) else {
            report(node.mark, "\(what) must be a whole number, found '\(text)'", hint: "write digits only; " + hint)
            return nil
        }
        guard range.contains(n) else {
            report(node.mark, "\(what) must be between \(range.lowerBound) and \(range.upperBound)", hint: hint)
            return nil
        }
        return n
    }

    mutating func bool(_ node: ConfigNode, what: String) -> Bool? {
        guard let text = string(node, what: "true or false") else { return nil }
        guard let value = ConfigBoolean.read(text) else {
            report(node.mark, ConfigBoolean.problem(what, found: text), hint: ConfigBoolean.hint)
            return nil
        }
        return value
    }

    mutating func duration(_ node: ConfigNode, key: String) -> Duration? {
        guard let text = string(node, what: "a duration") else { return nil }
        do {
            return try DurationText.read(text)
        } catch .tooLong {
            report(node.mark, "\(key): '\(text)' is longer than \(DurationText.format(DurationText.longest)), the longest duration allowed",
                   hint: "durations are seconds to days, e.g. 5s, 2m, 72h")
        } catch {
            report(node.mark, "\(key): '\(text)' is not a duration", hint: "write a number and a unit: 250ms, 5s, 2m, 1h")
        }
        return nil
    }

    /// Ids become MQTT topic levels: letters, digits, '-', '_' and '.'.
    mutating func topicName(_ node: ConfigNode?, what: String) -> String? {
        guard let node, let text = string(node, what: what) else { return nil }
        if text.isEmpty {
            report(node.mark, "\(what) is empty",
                   hint: what == "device" ? "write this board's id, unique within its site (e.g. lot-b-gate): two boards with one id "
                       + "mix their events" : "write it (letters, digits, '-', '_' and '.')")
            return nil
        }
        let ok = text.unicodeScalars.allSatisfy {
            (("a"..."z").contains($0) || ("A"..."Z").contains($0) || ("0"..."9").contains($0)
             || $0 == "-" || $0 == "_" || $0 == ".")
        }
        if !ok {
            report(node.mark, "\(what) '\(text)' has characters that cannot go in an MQTT topic",
                   hint: "use letters, digits, '-', '_' and '.' only (no spaces, '/', '+' or '#')")
            return nil
        }
        return text
    }

    mutating func unique<T>(_ items: [T], id: KeyPath<T, String>, mark: KeyPath<T, Mark>, what: String) -> [T] {
        var seen: [String: Mark] = [:]
        return items.filter { item in
            let key = item[keyPath: id]
            if let first = seen[key] {
                report(item[keyPath: mark], "duplicate \(what) id '\(key)' (first defined at line \(first.line))",
                       hint: "every \(what) needs its own id")
                return false
            }
            seen[key] = item[keyPath: mark]
            return true
        }
    }
}

/// A mapping whose keys were checked; `required` reports a missing key at the mapping.
struct MappingNode {
    var mark: Mark
    var values: [String: ConfigNode] = [:]

    subscript(key: String) -> ConfigNode? { values[key] }

    func required(_ key: String, _ reader: inout ConfigReader) -> ConfigNode? {
        if let value = values[key] { return value }
        reader.report(mark, "missing required key '\(key)'", hint: "add `\(key):` here")
        return nil
    }
}

/// The closest allowed word, when it is close enough to be a typo.
public func suggestion(for word: String, among candidates: some Collection<String>) -> String? {
    let scored = candidates.map { ($0, editDistance(word.lowercased(), $0.lowercased())) }
    guard let best = scored.min(by: { $0.1 < $1.1 }) else { return nil }
    return best.1 <= max(2, word.count / 3) ? best.0 : nil
}

func editDistance(_ a: String, _ b: String) -> Int {
    let a = Array(a), b = Array(b)
    if a.isEmpty { return b.count }
    var previous = Array(0...b.count)
    for i in 1...a.count {
        var current = [i] + Array(repeating: 0, count: b.count)
        for j in 1...max(b.count, 1) where j <= b.count {
            current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1))
        }
        previous = current
    }
    return previous[b.count]
}
