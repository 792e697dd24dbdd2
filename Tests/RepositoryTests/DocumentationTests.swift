import Foundation
import Testing

/// What a newcomer meets first keeps its promises: a short README, links
/// that lead somewhere, and no reference to documents outside the repository.
@Suite struct DocumentationTests {
    @Test func theReadmeStaysShort() throws {
        let lines = try Repository.read("README.md").split(separator: "\n", omittingEmptySubsequences: false).count
        #expect(lines <= 300, "README.md has \(lines) lines; reference belongs in docs/")
    }

    @Test func everyLinkOfTheDocsResolves() throws {
        var broken: [String] = []
        for page in Repository.markdownPages {
            let text = try Repository.read(page)
            let folder = (page as NSString).deletingLastPathComponent
            for target in Self.links(in: text) where !target.contains("://") && !target.hasPrefix("mailto:") {
                let parts = target.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false).map(String.init)
                let file = parts[0].isEmpty ? page : (folder.isEmpty ? parts[0] : "\(folder)/\(parts[0])")
                guard Repository.exists(file) else {
                    broken.append("\(page): \(target) (no file \(file))")
                    continue
                }
                if parts.count == 2, file.hasSuffix(".md") {
                    let anchors = Self.anchors(in: try Repository.read((file as NSString).standardizingPath))
                    if !anchors.contains(parts[1]) { broken.append("\(page): \(target) (no heading #\(parts[1]) in \(file))") }
                }
            }
        }
        #expect(broken.isEmpty, "\(broken.joined(separator: "\n"))")
    }

    @Test func nothingCitesADocumentOutsideTheRepository() throws {
        let name = "PRODUCT" + ".md"
        var citing: [String] = []
        for folder in ["Sources", "Tests", "docs", "scripts", "sql", "examples"] {
            for path in Repository.files(under: folder, endingIn: "") where !path.hasSuffix(".png") {
                guard let text = try? Repository.read(path) else { continue }
                if text.contains(name) { citing.append(path) }
            }
        }
        for path in ["README.md", "Package.swift", "Dockerfile", "docker-compose.yml"] where try Repository.read(path).contains(name) {
            citing.append(path)
        }
        #expect(citing.isEmpty, "\(citing)")
    }

    /// The targets of `[text](target)` outside code blocks and code spans.
    static func links(in markdown: String) -> [String] {
        var targets: [String] = []
        var inBlock = false
        for line in markdown.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.trimmingCharacters(in: .whitespaces).hasPrefix("```") { inBlock.toggle(); continue }
            if inBlock { continue }
            let prose = line.split(separator: "`", omittingEmptySubsequences: false).enumerated()
                .filter { $0.offset % 2 == 0 }.map(\.element).joined(separator: " ")
            var rest = Substring(prose)
            while let open = rest.range(of: "](") {
                let after = rest[open.upperBound...]
                guard let close = after.firstIndex(of: ")") else { break }
                targets.append(String(after[..<close]))
                rest = after[close...]
            }
        }
        return targets
    }

    /// The anchors GitHub gives a page's headings: lowercased, punctuation
    /// other than `-` and `_` dropped, spaces as `-`.
    static func anchors(in markdown: String) -> Set<String> {
        var anchors = Set<String>()
        var inBlock = false
        for line in markdown.split(separator: "\n") {
            if line.trimmingCharacters(in: .whitespaces).hasPrefix("```") { inBlock.toggle(); continue }
            guard !inBlock, line.hasPrefix("#") else { continue }
            let title = line.drop { $0 == "#" }.trimmingCharacters(in: .whitespaces).lowercased()
            let kept = title.unicodeScalars.filter {
                CharacterSet.alphanumerics.contains($0) || $0 == "-" || $0 == "_" || $0 == " "
            }
            anchors.insert(String(String.UnicodeScalarView(kept)).replacingOccurrences(of: " ", with: "-"))
        }
        return anchors
    }
}
