# captf: one static binary, used both as the manager and, copied by each
# Job's init container, as the in-Job runner (SPEC J5).
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath \
    -ldflags "-X github.com/captf/captf/pkg/version.Version=${VERSION}" \
    -o /captf ./cmd/captf

FROM gcr.io/distroless/static:nonroot
COPY --from=build /captf /captf
USER 65532:65532
ENTRYPOINT ["/captf"]
