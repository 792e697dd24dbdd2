import Foundation

/// A contribution as the analytics projection stores it
/// (`analytics_contributions.items`): compared byte for byte with the next
/// one (equal, the common case, means nothing to do), decoded only when they
/// differ. Product ids and currencies are listed once, items refer to them
/// by index; integers are LEB128 varints (zigzag for signed values).
///
/// Version 2 (written now) keeps an item in five bytes where version 1
/// took ten (332 bytes a subscriber of the bench's log, 47 bytes an event):
/// its day as the difference from the item before, its environment, store
/// and metric in one byte, and both string indexes in one byte when each is
/// below 16. Version 1 is still read: a contribution stored by a build
/// before is replaced, not misread, at the subscriber's next change.
public enum AnalyticsContributionCoding {
    /// The metrics by their stored code (`AnalyticsMetric.code`).
    static let metrics: [AnalyticsMetric] = AnalyticsMetric.allCases.sorted()
    static let version: UInt8 = 2

    /// Version 2's item head: environment, store, both strings in one byte,
    /// and the metric's code in the five low bits.
    private static let sandboxBit: UInt8 = 0x80, googlePlayBit: UInt8 = 0x40, pairedBit: UInt8 = 0x20, metricBits: UInt8 = 0x1F

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
        body.reserveCapacity(items.count * 6)
        var day = 0
        for item in items {
            writeSigned(Int64(item.day) - Int64(day), to: &body)
            day = item.day
            let product = index(item.productID), currency = index(item.currency)
            let paired = product < 16 && currency < 16
            body.append((item.environment == .production ? 0 : sandboxBit) | (item.store == .appStore ? 0 : googlePlayBit)
                        | (paired ? pairedBit : 0) | item.metric.code)
            if paired {
                body.append(UInt8(product << 4 | currency))
            } else {
                write(product, to: &body)
                write(currency, to: &body)
            }
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
    /// build reads (the projection then treats the subscriber as new:
    /// a rebuild recomputes everything).
    public static func decode(_ bytes: some Collection<UInt8>) -> [AnalyticsItem]? {
        var reader = Reader(bytes: Array(bytes))
        guard let stored = reader.byte(), stored == 1 || stored == version,
              let stringCount = reader.varint(), stringCount <= UInt64(bytes.count) else { return nil }
        var strings: [String] = []
        for _ in 0..<stringCount {
            guard let length = reader.varint(), let utf8 = reader.take(Int(clamping: length)) else { return nil }
            strings.append(String(decoding: utf8, as: UTF8.self))
        }
        guard let count = reader.varint(), count <= UInt64(bytes.count) else { return nil }
        var items: [AnalyticsItem] = []
        items.reserveCapacity(Int(count))
        var day: Int64 = 0
        for _ in 0..<count {
            guard let item = stored == 1 ? reader.itemOfVersion1(strings: strings)
                    : reader.item(strings: strings, after: &day) else { return nil }
            items.append(item)
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

        /// An item of version 2, whose day follows `day`.
        mutating func item(strings: [String], after day: inout Int64) -> AnalyticsItem? {
            guard let difference = signed(), let head = byte() else { return nil }
            let (sum, overflow) = day.addingReportingOverflow(difference)
            let metric = head & AnalyticsContributionCoding.metricBits
            guard !overflow, let next = Int(exactly: sum), metric < UInt8(AnalyticsContributionCoding.metrics.count) else { return nil }
            day = sum
            let product: UInt64, currency: UInt64
            if head & AnalyticsContributionCoding.pairedBit != 0 {
                guard let pair = byte() else { return nil }
                (product, currency) = (UInt64(pair >> 4), UInt64(pair & 0x0F))
            } else {
                guard let first = varint(), let second = varint() else { return nil }
                (product, currency) = (first, second)
            }
            guard product < UInt64(strings.count), currency < UInt64(strings.count),
                  let offset = varint(), offset <= UInt64(Int32.max), let value = signed() else { return nil }
            return AnalyticsItem(day: next, environment: head & AnalyticsContributionCoding.sandboxBit == 0 ? .production : .sandbox,
                                 store: head & AnalyticsContributionCoding.googlePlayBit == 0 ? .appStore : .googlePlay,
                                 productID: strings[Int(product)], currency: strings[Int(currency)],
                                 metric: AnalyticsContributionCoding.metrics[Int(metric)], offset: Int(offset), value: value)
        }

        /// An item of version 1: its day whole, a byte each for the
        /// environment and the store, then varints.
        mutating func itemOfVersion1(strings: [String]) -> AnalyticsItem? {
            guard let day = signed(), let environment = byte(), let store = byte(),
                  let metric = varint(), metric < UInt64(AnalyticsContributionCoding.metrics.count),
                  let product = varint(), product < UInt64(strings.count),
                  let currency = varint(), currency < UInt64(strings.count),
                  let offset = varint(), offset <= UInt64(Int32.max), let value = signed(), let whole = Int(exactly: day)
            else { return nil }
            return AnalyticsItem(day: whole, environment: environment == 0 ? .production : .sandbox,
                                 store: store == 0 ? .appStore : .googlePlay, productID: strings[Int(product)],
                                 currency: strings[Int(currency)], metric: AnalyticsContributionCoding.metrics[Int(metric)],
                                 offset: Int(offset), value: value)
        }
    }
}
