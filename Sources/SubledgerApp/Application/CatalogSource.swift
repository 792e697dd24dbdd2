import Foundation
import Ledger

/// The catalog and what `/v1/products` serves for it (read once at start).
public struct CatalogSource: Sendable {
    public var catalog: Catalog
    /// The file's modification time, for `Last-Modified`.
    public var modified: Date
    public var raw: Data

    public init(catalog: Catalog, modified: Date, raw: Data) {
        self.catalog = catalog
        self.modified = modified
        self.raw = raw
    }

    /// Loads `SUBLEDGER_PRODUCTS`; without it, an empty catalog.
    public static func load(path: String?) throws -> CatalogSource {
        guard let path else {
            let empty = Data(#"{"version": 0, "products": []}"#.utf8)
            return CatalogSource(catalog: try Catalog.decode(from: empty), modified: Date(timeIntervalSince1970: 0), raw: empty)
        }
        let url = URL(fileURLWithPath: path)
        let data: Data
        do {
            data = try Data(contentsOf: url)
        } catch {
            throw ConfigurationError(variable: "SUBLEDGER_PRODUCTS", message: "cannot read \(path): \(error.localizedDescription)")
        }
        let catalog: Catalog
        do {
            catalog = try Catalog.decode(from: data)
        } catch {
            throw ConfigurationError(variable: "SUBLEDGER_PRODUCTS", message: "\(path): \(error)")
        }
        let attributes = try? FileManager.default.attributesOfItem(atPath: path)
        return CatalogSource(catalog: catalog, modified: attributes?[.modificationDate] as? Date ?? Date(), raw: data)
    }
}
