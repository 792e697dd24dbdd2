// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "subledger",
    platforms: [.macOS(.v14)],
    products: [
        .executable(name: "subledger", targets: ["subledger"]),
    ],
    dependencies: [
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-nio-extras.git", from: "1.35.2"),
        .package(url: "https://github.com/apple/swift-crypto.git", from: "3.12.3"),
        .package(url: "https://github.com/apple/swift-certificates.git", from: "1.21.1"),
        .package(url: "https://github.com/swift-server/async-http-client.git", from: "1.37.0"),
    ],
    targets: [
        .systemLibrary(
            name: "CLibPQ",
            pkgConfig: "libpq",
            providers: [.apt(["libpq-dev"])]
        ),
        .target(
            name: "Postgres",
            dependencies: [
                "CLibPQ",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        .target(
            name: "EventStore",
            dependencies: [
                "Postgres", "JSON",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        // JSON values and their parser, RFC 3339 dates, string escapes; no
        // I/O, no dependencies.
        .target(name: "JSON"),
        .target(name: "Ledger", dependencies: ["JSON"]),
        .target(
            name: "AppStore",
            dependencies: [
                "Ledger", "JSON",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "X509", package: "swift-certificates"),
            ]
        ),
        // Google Play's documents as values: the Pub/Sub push and its
        // DeveloperNotification, fetched purchases and voided pages into the
        // ledger's Play facts, the push's OIDC token, the service account's
        // assertion. No I/O: the app fetches, this reads what was fetched.
        .target(
            name: "GooglePlay",
            dependencies: [
                "Ledger", "JSON",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
            ]
        ),
        // The application: the one write path, reads, stores, projections,
        // workers, App Store integration, import. No HTTP here.
        .target(
            name: "SubledgerApp",
            dependencies: [
                "Postgres", "EventStore", "JSON", "Ledger", "AppStore", "GooglePlay",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        // The HTTP edge: controllers, middleware, the OpenAPI document; the
        // only place errors become statuses.
        .target(
            name: "HTTPAPI",
            dependencies: [
                "SubledgerApp", "Postgres", "EventStore", "JSON", "Ledger", "AppStore",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            resources: [.copy("Resources/openapi.yaml"), .copy("Resources/console")]
        ),
        // What every command shares: the configuration flags, logging,
        // the progress line and a projection's rebuild.
        .target(
            name: "CommandSupport",
            dependencies: [
                "HTTPAPI", "SubledgerApp", "EventStore",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // `subledger bench`: the measurements, beside the service rather than in it.
        .target(
            name: "SubledgerBench",
            dependencies: [
                "CommandSupport", "HTTPAPI", "SubledgerApp", "Postgres", "EventStore", "JSON", "Ledger", "GooglePlay",
                // The Google Play bench pushes through the fake Google (BenchGooglePlay.swift).
                "GooglePlayTesting",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                // The bench mounts its floor routes (BenchFloorRoutes.swift) itself.
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .executableTarget(
            name: "subledger",
            dependencies: [
                "CommandSupport", "SubledgerBench", "HTTPAPI", "SubledgerApp", "Postgres", "EventStore", "JSON", "Ledger", "AppStore",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
            ]
        ),
        .target(
            name: "TestSupport",
            dependencies: ["Postgres", .product(name: "Logging", package: "swift-log")]
        ),
        .testTarget(name: "PostgresTests", dependencies: ["Postgres", "TestSupport"]),
        .testTarget(name: "EventStoreTests", dependencies: ["EventStore", "Postgres", "TestSupport"]),
        .testTarget(name: "JSONTests", dependencies: ["JSON", "TestSupport"]),
        .testTarget(name: "LedgerTests", dependencies: ["JSON", "Ledger", "TestSupport"]),
        // The repository's own promises: every doc link resolves, the
        // configuration page lists exactly the declared variables and flags.
        .testTarget(name: "RepositoryTests", dependencies: ["subledger", "CommandSupport", "SubledgerApp", "JSON", "Ledger"]),
        .target(
            name: "AppStoreTesting",
            dependencies: [
                "AppStore", "JSON", "Ledger",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "X509", package: "swift-certificates"),
            ]
        ),
        .testTarget(
            name: "AppStoreTests",
            dependencies: [
                "AppStore", "JSON", "Ledger", "AppStoreTesting", "TestSupport",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "X509", package: "swift-certificates"),
            ]
        ),
        // Google as tests need it: RSA keys and their JWKS, signed push
        // tokens, a service account and the token endpoint's check of its
        // assertion, Google-shaped purchases, pages and notifications.
        .target(
            name: "GooglePlayTesting",
            dependencies: [
                "GooglePlay", "Ledger", "JSON",
                // FakeGoogle answers Hummingbird requests (tests and `subledger bench` serve it).
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
            ]
        ),
        .testTarget(
            name: "GooglePlayTests",
            dependencies: [
                "GooglePlay", "GooglePlayTesting", "Ledger", "JSON",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
            ]
        ),
        // A database-backed application for tests: dependencies on a fresh
        // database, random histories written through the write path, the
        // fake Google on loopback, the personal-data scan of stored bytes.
        .target(
            name: "SubledgerAppTesting",
            dependencies: [
                "SubledgerApp", "EventStore", "Postgres", "JSON", "Ledger", "GooglePlay", "GooglePlayTesting", "TestSupport",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // The application's parts without the HTTP layer: the write and
        // read paths, projections and rebuilds, keys, the Play API client.
        .testTarget(
            name: "SubledgerAppTests",
            dependencies: [
                "SubledgerApp", "SubledgerAppTesting", "TestSupport", "EventStore", "JSON", "Ledger", "Postgres",
                "GooglePlay", "GooglePlayTesting",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "Crypto", package: "swift-crypto"),
            ]
        ),
        // The service through its router and on loopback: every route, its
        // errors and limits, and the flows that span the API, the workers
        // and the commands.
        .testTarget(
            name: "HTTPAPITests",
            dependencies: [
                "HTTPAPI", "SubledgerApp", "SubledgerAppTesting", "SubledgerBench", "TestSupport", "EventStore", "JSON", "Ledger", "Postgres",
                "AppStoreTesting", "AppStore", "GooglePlay", "GooglePlayTesting",
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "X509", package: "swift-certificates"),
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)
