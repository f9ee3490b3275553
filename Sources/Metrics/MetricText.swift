/// Prometheus's text exposition format (version 0.0.4), what node-exporter's textfile collector reads: for each
/// family a `# HELP` and a `# TYPE` line, then its samples, one per line. No timestamps: the collector refuses them.
public struct MetricFamily: Equatable, Sendable {
    public enum Kind: String, Sendable { case counter, gauge, histogram }

    public struct Sample: Equatable, Sendable {
        /// Added to the family's name (`_bucket`, `_sum`, `_count` of a histogram; empty otherwise).
        public var suffix: String
        public var labels: [(String, String)]
        public var value: Double

        public init(suffix: String = "", labels: [(String, String)] = [], value: Double) {
            self.suffix = suffix
            self.labels = labels
            self.value = value
        }

        public static func == (a: Sample, b: Sample) -> Bool {
            a.suffix == b.suffix && a.value == b.value && a.labels.elementsEqual(b.labels, by: { $0 == $1 })
        }
    }

    public var name: String
    public var help: String
    public var kind: Kind
    public var samples: [Sample]

    public init(_ name: String, _ kind: Kind, help: String, samples: [Sample]) {
        self.name = name
        self.kind = kind
        self.help = help
        self.samples = samples
    }

    /// One sample without labels.
    public init(_ name: String, _ kind: Kind, help: String, value: Double) {
        self.init(name, kind, help: help, samples: [Sample(value: value)])
    }
}

public enum MetricText {
    /// The families in order, each with its HELP and TYPE lines, ending with a newline (the format wants one).
    public static func render(_ families: [MetricFamily]) -> String {
        var text = ""
        for family in families {
            text += "# HELP \(family.name) \(escapeHelp(family.help))\n# TYPE \(family.name) \(family.kind.rawValue)\n"
            for sample in family.samples {
                text += family.name + sample.suffix
                if !sample.labels.isEmpty {
                    text += "{" + sample.labels.map { "\($0.0)=\"\(escapeLabel($0.1))\"" }.joined(separator: ",") + "}"
                }
                text += " " + number(sample.value) + "\n"
            }
        }
        return text
    }

    /// A whole number without a fraction (counters read as counts), infinities as Prometheus spells them.
    public static func number(_ value: Double) -> String {
        if value.isNaN { return "NaN" }
        if value.isInfinite { return value > 0 ? "+Inf" : "-Inf" }
        if value == value.rounded(), abs(value) < 1e15 { return String(Int64(value)) }
        return String(value)
    }

    /// A label value: backslash, double quote and newline escaped (a device id is the agent's config's text).
    static func escapeLabel(_ text: String) -> String {
        var out = ""
        for c in text {
            switch c {
            case "\\": out += "\\\\"
            case "\"": out += "\\\""
            case "\n": out += "\\n"
            default: out.append(c)
            }
        }
        return out
    }

    static func escapeHelp(_ text: String) -> String {
        text.replacingBackslashesAndNewlines
    }
}

private extension String {
    var replacingBackslashesAndNewlines: String {
        var out = ""
        for c in self {
            switch c {
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            default: out.append(c)
            }
        }
        return out
    }
}
