import Foundation

/// A one-line progress display for long commands: redrawn in place on a
/// terminal, at most ten times a second; elsewhere only the final line.
public final class TerminalProgress: @unchecked Sendable {
    // Safety: `lastDrawn` is guarded by `lock`.
    private let label: String
    private let lock = NSLock()
    private var lastDrawn = ContinuousClock.now - .seconds(1)
    private let isTerminal = isatty(STDERR_FILENO) == 1

    public init(label: String) { self.label = label }

    /// Redraws "label  detail"; `detail` is only built when it is drawn.
    public func update(_ detail: @autoclosure () -> String) {
        guard isTerminal else { return }
        lock.withLock {
            let now = ContinuousClock.now
            guard now - lastDrawn > .milliseconds(100) else { return }
            lastDrawn = now
            FileHandle.standardError.write(Data("\r\u{1B}[K\(label)  \(detail())".utf8))
        }
    }

    /// Replaces the progress line with "label: summary".
    public func finish(_ summary: String) {
        FileHandle.standardError.write(Data("\(isTerminal ? "\r\u{1B}[K" : "")\(label): \(summary)\n".utf8))
    }
}
