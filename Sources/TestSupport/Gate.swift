/// Holds every caller of `pass` until `release`, counting the callers that
/// came: a test's way to stop work at a chosen point and see who reached it.
public actor Gate {
    public private(set) var entered = 0
    private var isOpen = false
    private var waiting: [CheckedContinuation<Void, Never>] = []

    public init() {}

    public func pass() async {
        entered += 1
        guard !isOpen else { return }
        await withCheckedContinuation { waiting.append($0) }
    }

    public func release() {
        isOpen = true
        for continuation in waiting { continuation.resume() }
        waiting = []
    }
}
