import Foundation
import Testing

/// Log lines name a subscriber only by `LogReference.subscriber` (a digest):
/// a subscriber id is personal data, and logs are kept outside the database
/// that erasure cleans.
@Suite struct LogPrivacyTests {
    @Test func noLogMetadataCarriesASubscriberIdAsItIs() throws {
        var offending: [String] = []
        for path in Repository.files(under: "Sources", endingIn: ".swift") {
            let lines = try Repository.read(path).split(separator: "\n", omittingEmptySubsequences: false)
            for (number, line) in lines.enumerated() {
                // A metadata value interpolating something named like a subscriber id…
                guard line.contains("\": \"\\("), line.range(of: #"\\\([^)]*subscriberI[Dd]"#, options: .regularExpression) != nil
                        || line.range(of: #"\\\((owner|claimed\.changeID)\b"#, options: .regularExpression) != nil
                else { continue }
                // …is allowed only through the digest.
                if !line.contains("LogReference.subscriber(") { offending.append("\(path):\(number + 1): \(line.trimmingCharacters(in: .whitespaces))") }
            }
        }
        #expect(offending.isEmpty, "\(offending.joined(separator: "\n"))")
    }
}
