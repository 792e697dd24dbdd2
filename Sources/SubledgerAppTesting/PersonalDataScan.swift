import Foundation

/// Finds a personal value in stored text in any readable form: plain, or
/// base64 (standard and URL alphabets) at any of the three alignments it can
/// have inside a longer encoded payload, or base64 of such base64 — as a
/// token sits in the transaction JWS inside a notification's `signedPayload`.
public struct PersonalDataScan {
    /// The fragments whose presence means the value is readable.
    public let forms: Set<String>

    public init(_ value: String) {
        var forms: Set<String> = [value]
        let once = Self.fragments(of: Data(value.utf8))
        forms.formUnion(once)
        for fragment in once where fragment.count >= 8 {
            forms.formUnion(Self.fragments(of: Data(fragment.utf8)))
        }
        self.forms = forms
    }

    /// Every form of the value found in `text`.
    public func matches(in text: String) -> [String] {
        forms.filter { text.contains($0) }.sorted()
    }

    /// The part of base64 that is the same whatever surrounds `bytes`, when
    /// 0, 1 or 2 bytes precede it: the characters of the 3-byte groups that
    /// hold only its own bytes. Both alphabets.
    public static func fragments(of bytes: Data) -> [String] {
        var fragments: [String] = []
        for lead in 0..<3 {
            let padded = Data(repeating: 0, count: lead) + bytes
            let encoded = Array(padded.base64EncodedString())
            let first = lead == 0 ? 0 : 4
            let last = padded.count / 3 * 4
            guard last - first >= 4 else { continue }
            let standard = String(encoded[first..<last])
            fragments.append(standard)
            fragments.append(standard.replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_"))
        }
        return fragments
    }
}
