/// The release this build is: what `outpost --version` prints, the server's
/// health answer carries and its first log line says, so an operator can
/// tell which servers of a fleet run which release during an upgrade.
public enum OutpostVersion {
    /// The release, as `major.minor.patch`.
    public static let current = "0.3.0"
}
