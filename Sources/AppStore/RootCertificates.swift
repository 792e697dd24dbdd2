import Foundation
import X509

extension AppStoreVerifier {
    /// Reads `SUBLEDGER_APPSTORE_ROOT_CERTS`: comma-separated paths of DER
    /// (Apple ships `AppleRootCA-G3.cer`) or PEM files; a PEM file may hold
    /// several certificates. Errors name the file at fault.
    public static func loadRootCertificates(paths: String) throws(AppStoreConfigurationError) -> [Certificate] {
        let list = paths.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        guard !list.isEmpty else {
            throw AppStoreConfigurationError(path: "", message: "no certificate file given; set it to comma-separated DER or PEM files such as AppleRootCA-G3.cer.")
        }
        var certificates: [Certificate] = []
        for path in list {
            certificates += try loadCertificates(at: path)
        }
        return certificates
    }

    /// The certificates in one DER or PEM file.
    public static func loadCertificates(at path: String) throws(AppStoreConfigurationError) -> [Certificate] {
        let contents: Data
        do {
            contents = try Data(contentsOf: URL(fileURLWithPath: path))
        } catch {
            throw AppStoreConfigurationError(path: path, message: "cannot be read (\(error.localizedDescription)).")
        }
        if let text = String(data: contents, encoding: .utf8), text.contains("-----BEGIN") {
            let blocks = pemCertificateBlocks(text)
            guard !blocks.isEmpty else {
                throw AppStoreConfigurationError(path: path, message: "is PEM but holds no '-----BEGIN CERTIFICATE-----' block.")
            }
            var certificates: [Certificate] = []
            for (index, block) in blocks.enumerated() {
                do {
                    certificates.append(try Certificate(pemEncoded: block))
                } catch {
                    throw AppStoreConfigurationError(path: path, message: "PEM certificate #\(index + 1) is not a valid X.509 certificate: \(error).")
                }
            }
            return certificates
        }
        do {
            return [try Certificate(derEncoded: Array(contents))]
        } catch {
            throw AppStoreConfigurationError(path: path, message: "is neither a PEM nor a DER X.509 certificate: \(error).")
        }
    }

    private static func pemCertificateBlocks(_ text: String) -> [String] {
        let begin = "-----BEGIN CERTIFICATE-----", end = "-----END CERTIFICATE-----"
        var blocks: [String] = []
        var rest = text[...]
        while let start = rest.range(of: begin), let stop = rest.range(of: end, range: start.upperBound..<rest.endIndex) {
            blocks.append(String(rest[start.lowerBound..<stop.upperBound]))
            rest = rest[stop.upperBound...]
        }
        return blocks
    }
}
