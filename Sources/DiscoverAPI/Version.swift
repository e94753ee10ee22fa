/// The version of discoverd and its API, reported by `GetInfo` and `Status`.
public enum DiscoverdVersion {
    public static let current = "0.1.0"
}
