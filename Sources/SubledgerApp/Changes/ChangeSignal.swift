import Foundation
import Logging
import Postgres

/// Wakes the pull feed's long-polls when changes are published: one
/// connection per instance listens to `subledger_changes` and fans each
/// notification out to every waiting request, however many there are.
///
/// The connection is opened by the first waiter and closed after a while
/// with none. A waiter takes a `ticket` (which returns once the connection
/// listens) before it reads the feed, then waits for a notification after
/// that ticket: a change committed between the read and the wait is not
/// missed.
public actor ChangeSignal {
    public struct Ticket: Sendable {
        let generation: UInt64
    }

    private var generation: UInt64 = 0
    private var waiters: [UUID: CheckedContinuation<Void, Never>] = [:]
    private var ready: [CheckedContinuation<Void, Never>] = []
    private var listening = false
    private var listener: Task<Void, Never>?
    private var lastWaiter = ContinuousClock.now
    /// How long the connection stays open with no waiter.
    let idleTimeout: Duration
    let logger: Logger

    public init(idleTimeout: Duration = .seconds(60), logger: Logger = Logger(label: "subledger.changes.signal")) {
        self.idleTimeout = idleTimeout
        self.logger = logger
    }

    /// Starts listening if needed; returns once notifications are received.
    public func ticket(conninfo: String) async -> Ticket {
        lastWaiter = .now
        if listener == nil {
            listener = Task { await self.listen(conninfo: conninfo) }
        }
        if !listening {
            await withCheckedContinuation { ready.append($0) }
        }
        return Ticket(generation: generation)
    }

    /// Returns when a notification arrived after `ticket`, or after `timeout`.
    public func wait(after ticket: Ticket, timeout: Duration) async {
        guard generation == ticket.generation, timeout > .zero else { return }
        let id = UUID()
        let timer = Task {
            try? await Task.sleep(for: timeout)
            self.resume(id)
        }
        await withCheckedContinuation { waiters[id] = $0 }
        timer.cancel()
        lastWaiter = .now
    }

    private func resume(_ id: UUID) {
        waiters.removeValue(forKey: id)?.resume()
    }

    private func notified() {
        generation &+= 1
        let all = waiters
        waiters = [:]
        for continuation in all.values { continuation.resume() }
    }

    private func setListening(_ value: Bool) {
        listening = value
        if value {
            for continuation in ready { continuation.resume() }
            ready = []
        } else {
            // Without a connection a notification may be missed: wake every
            // waiter so each reads the feed again.
            notified()
        }
    }

    private func isIdle() -> Bool {
        waiters.isEmpty && ready.isEmpty && ContinuousClock.now - lastWaiter > idleTimeout
    }

    private func stopped() {
        listener = nil
        listening = false
        let pending = ready
        ready = []
        for continuation in pending { continuation.resume() }
    }

    private func listen(conninfo: String) async {
        defer { stopped() }
        while !Task.isCancelled {
            do {
                let connection = try await Connection.connect(to: conninfo, logger: logger)
                defer { connection.close() }
                try await connection.listen(ChangeRows.notificationChannel)
                setListening(true)
                while !Task.isCancelled {
                    if try await connection.waitForNotification(timeout: .seconds(1)) != nil {
                        notified()
                    } else if isIdle() {
                        setListening(false)
                        return
                    }
                }
            } catch {
                setListening(false)
                logger.warning("change listener failed; retrying", metadata: ["error": "\(String(reflecting: error))"])
                // Waiters are released so their requests answer from a read, not hang.
                stoppedWaiting()
                if isIdle() { return }
                try? await Task.sleep(for: .seconds(1))
            }
        }
    }

    private func stoppedWaiting() {
        let pending = ready
        ready = []
        for continuation in pending { continuation.resume() }
    }
}
