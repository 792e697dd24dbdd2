/// Random JSON documents as text, for the tests of the hand-written parser
/// and writer: whitespace of every kind, numbers at the edges of `Int64`
/// and `Double`, strings with escapes and surrogate pairs, nested arrays and
/// objects with distinct keys.
public enum GeneratedJSON {
    public static func document(_ random: inout SplitMix64) -> String {
        value(&random, depth: 0)
    }

    public static func value(_ random: inout SplitMix64, depth: Int) -> String {
        let space = [" ", "", "\n", "\t", "\r\n  "].randomElement(using: &random)!
        switch Int.random(in: 0..<(depth > 3 ? 5 : 8), using: &random) {
        case 0: return space + ["null", "true", "false"].randomElement(using: &random)! + space
        case 1, 2: return space + number(&random) + space
        case 3, 4: return space + string(&random) + space
        case 5:
            let elements = (0..<Int.random(in: 0...4, using: &random)).map { _ in value(&random, depth: depth + 1) }
            return space + "[" + elements.joined(separator: ",") + "]" + space
        default:
            // Distinct keys: JSONDecoder reads only the first value of a
            // key named twice, and so lets damage in the others pass
            // (`aKeyNamedTwiceKeepsItsFirstValue`).
            let keys = ["a", "b", "transactionId", "é"].shuffled(using: &random).prefix(Int.random(in: 0...4, using: &random))
            let members = keys.map { key in
                string(&random, plain: key) + space + ":" + value(&random, depth: depth + 1)
            }
            return space + "{" + members.joined(separator: ",") + "}" + space
        }
    }

    public static func number(_ random: inout SplitMix64) -> String {
        switch Int.random(in: 0..<8, using: &random) {
        case 0: return String(Int64.random(in: .min ... .max, using: &random))
        case 1: return String(Int.random(in: -1000...1000, using: &random))
        case 2: return "\(Int.random(in: -99...99, using: &random)).\(Int.random(in: 0...999, using: &random))"
        case 3: return "\(Int.random(in: 1...9, using: &random))e\(Int.random(in: -5...20, using: &random))"
        case 4: return "\(Int.random(in: 0...9, using: &random)).0E+\(Int.random(in: 0...3, using: &random))"
        case 5: return "1234567890123456789012345"
        case 6: return "-0.0"
        default: return String(Double.random(in: -1e6...1e6, using: &random))
        }
    }

    public static func string(_ random: inout SplitMix64, plain: String? = nil) -> String {
        if let plain { return "\"" + plain + "\"" }
        let pieces = ["x", "héllo", "😀", "\\n", "\\\"", "\\\\", "\\/", "\\u00e9", "\\ud83d\\ude00", "\\u0000", "\\t", " ", "ü", "\\b"]
        return "\"" + (0..<Int.random(in: 0...5, using: &random)).map { _ in pieces.randomElement(using: &random)! }.joined() + "\""
    }
}
