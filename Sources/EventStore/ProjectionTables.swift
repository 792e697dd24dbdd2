/// Which copy of a projection's tables a statement writes: the live ones,
/// or the shadow copies a blue-green rebuild fills (`sql/0011_shadow_rebuilds.sql`).
public struct ProjectionTables: Sendable, Equatable {
    /// Appended to each live table's name.
    public let suffix: String

    public static let live = ProjectionTables(suffix: "")
    public static let shadow = ProjectionTables(suffix: "__rebuild")

    /// The name of `table` in this copy. Table names are fixed identifiers of
    /// the schema, never input, so the result may be spliced into SQL.
    public func name(_ table: String) -> String { table + suffix }
}
