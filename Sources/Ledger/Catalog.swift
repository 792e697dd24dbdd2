import Foundation
import JSON

/// The App Store's five product types, with their JSON spelling.
public enum ProductType: String, Sendable, Hashable, Codable, CaseIterable {
    case consumable
    case nonConsumable = "non-consumable"
    case autoRenewable = "auto-renewable"
    case nonRenewing = "non-renewing"
    case free

    /// Whether a restore may bring it back (all but consumables).
    public var isRestorable: Bool { self != .consumable }
    /// Whether the catalog must give a `duration` (only non-renewing).
    public var takesDuration: Bool { self == .nonRenewing }
    /// Whether it has an end that reminders can precede.
    public var takesReminders: Bool { self == .nonRenewing || self == .autoRenewable }
}

/// One product of the catalog.
public struct Product: Sendable, Hashable, Codable {
    public var id: String
    public var type: ProductType
    /// Products of one group share coverage; defaults to the product id.
    public var group: String
    public var entitlements: [String]
    /// Non-renewing only: the length of one period.
    public var duration: ISODuration?
    /// Leads before coverage end at which to remind (`P0D` = the expiry prompt).
    public var reminders: [ISODuration]
    /// The store that sells it; for Google Play, `id` is Play's `productId`,
    /// or `productId:basePlanId` for one base plan.
    public var store: Store

    public init(id: String, type: ProductType, group: String? = nil, entitlements: [String] = [],
                duration: ISODuration? = nil, reminders: [ISODuration] = [], store: Store = .appStore) {
        self.id = id
        self.type = type
        self.group = group ?? id
        self.entitlements = entitlements
        self.duration = duration
        self.reminders = reminders
        self.store = store
    }

    enum CodingKeys: String, CodingKey { case id, type, group, entitlements, duration, reminders, store }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self.init(id: try container.decode(String.self, forKey: .id), type: try container.decode(ProductType.self, forKey: .type),
                  group: try container.decodeIfPresent(String.self, forKey: .group),
                  entitlements: try container.decodeIfPresent([String].self, forKey: .entitlements) ?? [],
                  duration: try container.decodeIfPresent(ISODuration.self, forKey: .duration),
                  reminders: try container.decodeIfPresent([ISODuration].self, forKey: .reminders) ?? [],
                  store: try container.decodeIfPresent(Store.self, forKey: .store) ?? .appStore)
    }

    /// An App Store product is written as before there were two stores (the
    /// catalog's fingerprint, and so every cached state, stays the same).
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(id, forKey: .id)
        try container.encode(type, forKey: .type)
        try container.encode(group, forKey: .group)
        try container.encode(entitlements, forKey: .entitlements)
        try container.encodeIfPresent(duration, forKey: .duration)
        try container.encode(reminders, forKey: .reminders)
        if store != .appStore { try container.encode(store, forKey: .store) }
    }
}

/// The product catalog (`SUBLEDGER_PRODUCTS`).
public struct Catalog: Sendable, Equatable {
    public let version: Int
    /// In file order.
    public let products: [Product]
    private let productsByID: [String: Product]
    /// Changes whenever a product's terms do: what a value computed with the
    /// catalog (a cached state) is keyed by.
    public let fingerprint: String

    /// Validates the products: unique ids, durations only (and always) on
    /// non-renewing products, reminders only on products that end, and one
    /// product type per group.
    public init(version: Int, products: [Product]) throws(CatalogError) {
        var byID: [String: Product] = [:]
        var groupTypes: [String: (ProductType, String)] = [:]
        for product in products {
            if product.store == .googlePlay, product.type == .nonRenewing || product.type == .free {
                throw CatalogError(productID: product.id,
                                   message: "Google Play sells auto-renewable, consumable and non-consumable products, not \(product.type.rawValue)")
            }
            // Ids are unique across stores: every reader finds a product by
            // its id alone (a Play product can use `productId:basePlanId`).
            guard byID[product.id] == nil else {
                throw CatalogError(productID: product.id, message: "the id appears more than once")
            }
            if product.type.takesDuration, product.duration == nil {
                throw CatalogError(productID: product.id, message: "a non-renewing product needs a duration such as \"P30D\"")
            }
            if !product.type.takesDuration, let duration = product.duration {
                throw CatalogError(productID: product.id,
                                   message: "duration \"\(duration)\" is only allowed on non-renewing products, not \(product.type.rawValue)")
            }
            if let duration = product.duration, duration.isZero {
                throw CatalogError(productID: product.id, message: "duration must be longer than P0D")
            }
            if !product.type.takesReminders, !product.reminders.isEmpty {
                throw CatalogError(productID: product.id,
                                   message: "reminders are only allowed on auto-renewable and non-renewing products, not \(product.type.rawValue)")
            }
            if let (type, other) = groupTypes[product.group], type != product.type {
                throw CatalogError(productID: product.id,
                                   message: "group '\(product.group)' mixes \(product.type.rawValue) with \(type.rawValue) product '\(other)'")
            }
            groupTypes[product.group] = (product.type, product.id)
            byID[product.id] = product
        }
        self.version = version
        self.products = products
        self.productsByID = byID
        self.fingerprint = Self.fingerprint(of: products)
    }

    /// FNV-1a (64 bits) of the products as sorted-key JSON.
    private static func fingerprint(of products: [Product]) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in (try? encoder.encode(products)) ?? Data() {
            hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01b3
        }
        return String(hash, radix: 16)
    }

    /// Decodes and validates the catalog file format.
    public static func decode(from data: Data) throws(CatalogError) -> Catalog {
        let root: JSONValue
        switch JSONValue.parse(data) {
        case .success(let value): root = value
        case .failure(let failure): throw CatalogError(productID: nil, message: "the file is not valid JSON: \(failure.detail)")
        }
        guard case .object(let object) = root else {
            throw CatalogError(productID: nil, message: "expected a JSON object with \"version\" and \"products\"")
        }
        var version = 1
        switch object["version"] {
        case nil, .null?: break
        case let value?:
            guard let number = value.wholeNumber, abs(number) < 1_000_000_000 else {
                throw CatalogError(productID: nil, message: "\"version\" must be an integer, got \(value.kindDescription)")
            }
            version = Int(number)
        }
        guard case .array(let entries)? = object["products"] else {
            throw CatalogError(productID: nil, message: "\"products\" must be an array of products")
        }
        var products: [Product] = []
        for (index, entry) in entries.enumerated() {
            products.append(try decodeProduct(entry, index: index))
        }
        return try Catalog(version: version, products: products)
    }

    /// The product with this id, if the catalog has it.
    public func product(id: String) -> Product? {
        productsByID[id]
    }

    /// The product of `store` with this id, if the catalog has it.
    public func product(id: String, store: Store) -> Product? {
        productsByID[id].flatMap { $0.store == store ? $0 : nil }
    }

    /// Every entitlement id some product grants, sorted.
    public var entitlementIDs: [String] {
        Set(products.flatMap(\.entitlements)).sorted()
    }

    private static func decodeProduct(_ entry: JSONValue, index: Int) throws(CatalogError) -> Product {
        guard case .object(let fields) = entry else {
            throw CatalogError(productID: nil, message: "products[\(index)] must be an object, got \(entry.kindDescription)")
        }
        guard case .string(let id)? = fields["id"], !id.isEmpty else {
            throw CatalogError(productID: nil, message: "products[\(index)] needs a non-empty string \"id\"")
        }
        func string(_ key: String) throws(CatalogError) -> String? {
            switch fields[key] {
            case nil, .null?: return nil
            case .string(let value)?: return value
            case let other?: throw CatalogError(productID: id, message: "\"\(key)\" must be a string, got \(other.kindDescription)")
            }
        }
        func strings(_ key: String) throws(CatalogError) -> [String] {
            switch fields[key] {
            case nil, .null?: return []
            case .array(let values)?:
                var result: [String] = []
                for value in values {
                    guard case .string(let text) = value else {
                        throw CatalogError(productID: id, message: "\"\(key)\" must be an array of strings")
                    }
                    result.append(text)
                }
                return result
            case let other?: throw CatalogError(productID: id, message: "\"\(key)\" must be an array of strings, got \(other.kindDescription)")
            }
        }
        func duration(_ text: String, _ key: String) throws(CatalogError) -> ISODuration {
            do {
                return try ISODuration(parsing: text)
            } catch {
                throw CatalogError(productID: id, message: "\(key) \(error.description)")
            }
        }

        guard let typeName = try string("type") else {
            throw CatalogError(productID: id, message: "\"type\" is required: one of \(ProductType.allCases.map(\.rawValue).joined(separator: ", "))")
        }
        guard let type = ProductType(rawValue: typeName) else {
            throw CatalogError(productID: id, message: "unknown type \"\(typeName)\"; expected one of \(ProductType.allCases.map(\.rawValue).joined(separator: ", "))")
        }
        let group = try string("group")
        if group == "" { throw CatalogError(productID: id, message: "\"group\" must not be empty") }
        var reminders: [ISODuration] = []
        for text in try strings("reminders") {
            reminders.append(try duration(text, "reminder"))
        }
        let periodLength: ISODuration?
        if let text = try string("duration") { periodLength = try duration(text, "duration") } else { periodLength = nil }
        let store: Store
        switch try string("store") {
        case nil: store = .appStore
        case let name?:
            guard let named = Store(rawValue: name) else {
                throw CatalogError(productID: id, message: "unknown store \"\(name)\"; expected app_store or google_play")
            }
            store = named
        }
        return Product(id: id, type: type, group: group, entitlements: try strings("entitlements"),
                       duration: periodLength, reminders: reminders, store: store)
    }
}

/// Why a catalog file was refused, naming the product when there is one.
public struct CatalogError: Error, Sendable, Equatable, CustomStringConvertible {
    public let productID: String?
    public let message: String

    public init(productID: String?, message: String) {
        self.productID = productID
        self.message = message
    }

    public var description: String {
        if let productID { return "catalog: product '\(productID)': \(message)" }
        return "catalog: \(message)"
    }
}
