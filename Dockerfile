# Build with the official Swift image, run on a slim Debian with libpq.
FROM swift:6.3-bookworm AS build
RUN apt-get update \
    && apt-get install -y --no-install-recommends libpq-dev pkg-config \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /build
COPY Package.swift ./
RUN swift package resolve
COPY Sources ./Sources
COPY Tests ./Tests
RUN swift build -c release --product subledger --static-swift-stdlib

FROM debian:bookworm-slim
RUN apt-get update \
    && apt-get install -y --no-install-recommends libpq5 ca-certificates tzdata \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --no-create-home --shell /usr/sbin/nologin subledger
COPY --from=build /build/.build/release/subledger /usr/local/bin/subledger
# Package resources (the OpenAPI document, the support console) are found beside the executable.
COPY --from=build /build/.build/release/subledger_HTTPAPI.resources /usr/local/bin/subledger_HTTPAPI.resources
COPY sql /usr/share/subledger/sql
COPY examples /usr/share/subledger/examples
ENV HOST=0.0.0.0 \
    PORT=8080 \
    SUBLEDGER_SQL_DIR=/usr/share/subledger/sql
USER subledger
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/subledger"]
CMD ["serve"]
