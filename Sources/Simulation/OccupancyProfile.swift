/// The ParkWise hourly occupancy profile (Bogotá local time), as the backend's simulator uses it.
public enum OccupancyProfile {
    /// Target share of spaces taken at an hour of a weekday (0–23).
    public static func target(hour: Int) -> Double {
        switch hour {
        case 7: return 0.45
        case 8...11: return 0.95
        case 12: return 0.70
        case 13...16: return 0.85
        case 17: return 0.55
        case 18...20: return 0.30
        default: return 0.10
        }
    }

    /// P1 1.0, P2 0.9, P3 0.8; deeper levels fill less.
    public static func levelFactor(_ level: String) -> Double {
        switch level {
        case "P2": return 0.9
        case "P3": return 0.8
        default: return 1.0
        }
    }
}
