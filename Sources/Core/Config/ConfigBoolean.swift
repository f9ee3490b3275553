/// A yes-or-no setting as both programs' config files write it: true/false, yes/no or on/off, in any case (YAML
/// writers put True and FALSE too). One reader for the agent's config and the bridge's.
public enum ConfigBoolean {
    /// The value, or nil when the text is none of the spellings.
    public static func read(_ text: String) -> Bool? {
        switch text.lowercased() {
        case "true", "yes", "on": return true
        case "false", "no", "off": return false
        default: return nil
        }
    }

    /// The problem with a text that is none of them: `active_low must be true or false, found 'maybe'`.
    public static func problem(_ key: String, found text: String) -> String { "\(key) must be true or false, found '\(text)'" }

    public static let hint = "write true or false (yes/no and on/off are read too, in any case)"
}
