import Foundation

/// A contribution as the analytics projection stores it
/// (`analytics_contributions.items`): compared byte for byte with the next
/// one (equal, the common case, means nothing to do), decoded only when they
/// differ. Product ids and currencies are listed once, items refer to them
/// by index; integers are LEB128 varints (zigzag for signed values).
public enum AnalyticsContributionCoding {
    /// The metrics by their stored code (`AnalyticsMetric.code`).
    static let metrics: [AnalyticsMetric] = AnalyticsMetric.allCases.sorted()
    static let version: UInt8 = 1

    public static func encode(_ items: [AnalyticsItem]) -> [UInt8] {
        var strings: [String] = []
        var indexes: [String: UInt64] = [:]
        func index(_ string: String) -> UInt64 {
            if let known = indexes[string] { return known }
            let next = UInt64(strings.count)
            strings.append(string)
            indexes[string] = next
            return next
        }
        var body: [UInt8] = []
        body.reserveCapacity(items.count * 10)
        for item in items {
            writeSigned(Int64(item.day), to: &body)
            body.append(item.environment == .production ? 0 : 1)
            body.append(item.store == .appStore ? 0 : 1)
            write(UInt64(item.metric.code), to: &body)
            write(index(item.productID), to: &body)
            write(index(item.currency), to: &body)
            write(UInt64(item.offset), to: &body)
            writeSigned(item.value, to: &body)
        }
        var bytes: [UInt8] = [version]
        write(UInt64(strings.count), to: &bytes)
        for string in strings {
            write(UInt64(string.utf8.count), to: &bytes)
            bytes += string.utf8
        }
        write(UInt64(items.count), to: &bytes)
        return bytes + body
    }

    /// The items of `bytes`; nil when they are not a contribution this
    /// version wrote (the projection then treats the subscriber as new:
    /// a rebuild recomputes everything).
    public static func decode(_ bytes: some Collection<UInt8>) -> [AnalyticsItem]? {
        var reader = Reader(bytes: Array(bytes))
        guard reader.byte() == version, let stringCount = reader.varint(), stringCount <= UInt64(bytes.count) else { return nil }
        var strings: [String] = []
        for _ in 0..<stringCount {
            guard let length = reader.varint(), let utf8 = reader.take(Int(clamping: length)) else { return nil }
            strings.append(String(decoding: utf8, as: UTF8.self))
        }
        guard let count = reader.varint(), count <= UInt64(bytes.count) else { return nil }
        var items: [AnalyticsItem] = []
        items.reserveCapacity(Int(count))
        for _ in 0..<count {
            guard let day = reader.signed(), let environment = reader.byte(), let store = reader.byte(),
                  let metric = reader.varint(), metric < UInt64(metrics.count),
                  let product = reader.varint(), product < UInt64(strings.count),
                  let currency = reader.varint(), currency < UInt64(strings.count),
                  let offset = reader.varint(), offset <= UInt64(Int32.max), let value = reader.signed()
            else { return nil }
            items.append(AnalyticsItem(day: Int(day), environment: environment == 0 ? .production : .sandbox,
                                       store: store == 0 ? .appStore : .googlePlay, productID: strings[Int(product)],
                                       currency: strings[Int(currency)], metric: metrics[Int(metric)], offset: Int(offset),
                                       value: value))
        }
        return reader.isAtEnd ? items : nil
    }

    private static func write(_ value: UInt64, to bytes: inout [UInt8]) {
        var value = value
        while value >= 0x80 {
            bytes.append(UInt8(value & 0x7F) | 0x80)
            value >>= 7
        }
        bytes.append(UInt8(value))
    }

    private static func writeSigned(_ value: Int64, to bytes: inout [UInt8]) {
        write(UInt64(bitPattern: (value << 1) ^ (value >> 63)), to: &bytes)
    }

    private struct Reader {
        let bytes: [UInt8]
        var index = 0

        var isAtEnd: Bool { index == bytes.count }

        mutating func byte() -> UInt8? {
            guard index < bytes.count else { return nil }
            defer { index += 1 }
            return bytes[index]
        }

        mutating func take(_ count: Int) -> ArraySlice<UInt8>? {
            guard count >= 0, count <= bytes.count - index else { return nil }
            defer { index += count }
            return bytes[index..<index + count]
        }

        mutating func varint() -> UInt64? {
            var value: UInt64 = 0
            var shift: UInt64 = 0
            while let byte = byte() {
                guard shift < 64 else { return nil }
                value |= UInt64(byte & 0x7F) << shift
                if byte < 0x80 { return value }
                shift += 7
            }
            return nil
        }

        mutating func signed() -> Int64? {
            varint().map { Int64(bitPattern: ($0 >> 1) ^ (0 &- ($0 & 1))) }
        }
    }
}
