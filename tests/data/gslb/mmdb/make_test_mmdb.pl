#!/usr/bin/perl
# Builds the small MaxMind DB files that tests/unit/test_geoip.c reads, so no download is
# needed. Requires Debian's libmaxmind-db-writer-perl; the outputs are committed so the tests
# do not need perl. Regenerate with:
#
#   cd tests/data/gslb/mmdb && perl make_test_mmdb.pl
#
# and re-run test_geoip (its expected tables mirror the networks below).
#
# `perl make_test_mmdb.pl --large N FILE [R]` instead writes a synthetic GeoLite2-City database
# with N IPv4 /24s plus N/8 IPv6 /48s sharing R distinct records (default N/8) for measuring the
# walk (test_geoip FILE); that one is not committed.
#
# test-city.mmdb (GeoIP2-City, ip_version 6, record_size 24, IPv4 aliased into ::ffff:0:0/96,
# 2001::/32 and 2002::/16 as MaxMind's own databases are). Layout that matters for merging
# in the nets tree (gslb/nettree) later:
#
#   58.32.0.0/13, 101.80.0.0/13, 240e::/20  one record (SH_TEL) in three places, IPv4 and IPv6
#   116.224.0.0/13 | 116.232.0.0/13          siblings of 116.224.0.0/12 with two *different*
#                                            records (postal codes differ) that classify the same
#                                            (AS/CN/31/Shanghai): a merge only nettree can do
#   116.232.0.0/13 , 116.240.0.0/13          adjacent, same record, but not siblings: stay apart
#   81.2.69.0/24 , 81.2.70.0/23              adjacent, same record, not siblings
#   202.112.0.0/16 , 2001:da8::/32           one record (BJ_EDU) in both families
#   5.1.0.0/16 , 2a00:1450:4001:81c::200e/128  one record (FRA), the IPv6 one a host route
#   1.1.1.1/32                               a host route (AU_BAD, coordinates out of range)
#   2001:4860::/32                           next to the 2001::/32 (Teredo) alias
#
# test-asn.mmdb (GeoLite2-ASN, ip_version 6, record_size 24, aliased):
#   14.16.0.0/13 + 14.24.0.0/13 (AS4134)     identical siblings: the writer stores 14.16.0.0/12
#   113.64.0.0/11 , 113.96.0.0/12 (AS4134)   adjacent, not siblings
#
# test-country-v4.mmdb (GeoLite2-Country, ip_version 4, record_size 28): a 32-bit tree.
# test-wide.mmdb (GeoLite2-Country, ip_version 6, record_size 32, no aliases): one record on
#   ::/64, so the IPv4 space (::/96) is inside a wider leaf; plus 2a02:ffc0::/29.
# test-anonymous-ip.mmdb (GeoIP2-Anonymous-IP): a type the GSLB must refuse.
use strict;
use warnings;
use utf8;

use MaxMind::DB::Writer::Tree;

my %TYPES = (
	autonomous_system_number       => 'uint32',
	autonomous_system_organization => 'utf8_string',
	geoname_id                     => 'uint32',
	latitude                       => 'double',
	longitude                      => 'double',
	accuracy_radius                => 'uint16',
	subdivisions                   => [ 'array', 'map' ],
	is_anonymous                   => 'boolean',
	is_anonymous_vpn               => 'boolean',
	map { $_ => 'map' } qw(continent country registered_country city names location postal traits),
);

sub key_type {
	my ($key) = @_;
	return $TYPES{$key} // 'utf8_string';
}

sub new_tree {
	my (%args) = @_;
	return MaxMind::DB::Writer::Tree->new(
		ip_version            => 6,
		record_size           => 24,
		languages             => ['en'],
		description           => { en => 'Steer unit test data, not real geolocation' },
		map_key_type_callback => \&key_type,
		alias_ipv6_to_ipv4    => 1,
		%args,
	);
}

sub write_tree {
	my ( $tree, $file ) = @_;
	open my $fh, '>:raw', $file or die "$file: $!\n";
	$tree->write_tree($fh);
	close $fh or die "$file: $!\n";
}

my %CONTINENT = (
	AS => [ 6255147, 'Asia' ],
	EU => [ 6255148, 'Europe' ],
	NA => [ 6255149, 'North America' ],
	OC => [ 6255151, 'Oceania' ],
);

# A GeoIP2-City style record. Optional: sub => [iso, geoname, name], city => [geoname, name],
# loc => [lat, lon], postal, asn (traits, as GeoIP2-Enterprise has it).
sub place {
	my (%a) = @_;
	my %r;
	$r{continent} = { code => $a{cont}, geoname_id => $CONTINENT{ $a{cont} }[0],
		names => { en => $CONTINENT{ $a{cont} }[1] } } if $a{cont};
	if ( $a{cc} ) {
		$r{country} = { iso_code => $a{cc}, geoname_id => $a{cc_id}, names => { en => $a{cc_name} } };
		$r{registered_country} = { %{ $r{country} } };
	}
	$r{registered_country} = { iso_code => $a{reg} } if $a{reg};
	$r{subdivisions} = [ { iso_code => $a{sub}[0], geoname_id => $a{sub}[1],
		names => { en => $a{sub}[2] } } ] if $a{sub};
	$r{city} = { geoname_id => $a{city}[0], names => { en => $a{city}[1], %{ $a{city}[2] // {} } } }
	    if $a{city};
	$r{location} = { latitude => $a{loc}[0], longitude => $a{loc}[1], accuracy_radius => 50 }
	    if $a{loc};
	$r{postal} = { code => $a{postal} } if $a{postal};
	$r{traits} = { autonomous_system_number => $a{asn} } if $a{asn};
	return \%r;
}

my %CN = ( cont => 'AS', cc => 'CN', cc_id => 1814991, cc_name => 'China' );
my %SH = ( %CN, sub => [ '31', 1796231, 'Shanghai' ], city => [ 1796236, 'Shanghai', { 'zh-CN' => '上海' } ],
	loc => [ 31.2222, 121.4581 ] );
my %BJ = ( %CN, sub => [ '11', 2038349, 'Beijing' ], city => [ 1816670, 'Beijing' ], loc => [ 39.9075, 116.3972 ] );
my %GB = ( cont => 'EU', cc => 'GB', cc_id => 2635167, cc_name => 'United Kingdom' );
my %FR = ( cont => 'EU', cc => 'FR', cc_id => 3017382, cc_name => 'France' );
my %DE = ( cont => 'EU', cc => 'DE', cc_id => 2921044, cc_name => 'Germany' );
my %US = ( cont => 'NA', cc => 'US', cc_id => 6252001, cc_name => 'United States' );

my %REC = (
	SH_TEL => place( %SH, postal => '200000', asn => 4812 ),
	SH_A   => place( %SH, postal => '200120' ),
	SH_B   => place( %SH, postal => '200135' ),
	BJ_EDU => place( %BJ, postal => '100084', asn => 4538 ),
	BJ_UNI => place( %BJ, postal => '100000' ),
	GZ     => place( %CN, sub => [ '44', 1809935, 'Guangdong' ], city => [ 1809858, 'Guangzhou' ],
		loc => [ 23.1167, 113.25 ] ),
	XA => place( %CN, sub => [ '61', 1798018, 'Shaanxi' ], city => [ 1790630, "Xi'an" ],
		loc => [ 34.2583, 108.9286 ] ),
	CN_NOLOC => place(%CN),
	SG => place( cont => 'AS', cc => 'SG', cc_id => 1880251, cc_name => 'Singapore',
		city => [ 1880252, 'Singapore' ], loc => [ 1.2897, 103.8501 ] ),
	LON => place( %GB, sub => [ 'ENG', 6269131, 'England' ], city => [ 2643743, 'London' ],
		loc => [ 51.5142, -0.0931 ] ),
	PAR => place( %FR, sub => [ 'IDF', 3012874, 'Île-de-France' ], city => [ 2988507, 'Paris' ],
		loc => [ 48.8566, 2.3522 ] ),
	FRA => place( %DE, sub => [ 'HE', 2905330, 'Hesse' ], city => [ 2925533, 'Frankfurt am Main' ],
		loc => [ 50.1109, 8.6821 ] ),
	FALK => place( %DE, sub => [ 'SN', 2842566, 'Saxony' ], city => [ 2928874, 'Falkenstein' ],
		loc => [ 50.4779, 12.3713 ] ),
	EU_ONLY => place( cont => 'EU', loc => [ 47.0, 8.0 ] ),
	NYC => place( %US, sub => [ 'NY', 5128638, 'New York' ], city => [ 5128581, 'New York' ],
		loc => [ 40.7128, -74.0060 ] ),
	LAX => place( %US, sub => [ 'CA', 5332921, 'California' ], city => [ 5368361, 'Los Angeles' ],
		loc => [ 34.0522, -118.2437 ] ),
	MTV => place( %US, sub => [ 'CA', 5332921, 'California' ], city => [ 5375480, 'Mountain View' ],
		loc => [ 37.386, -122.0838 ] ),
	DAL => place( %US, sub => [ 'TX', 4736286, 'Texas' ], city => [ 4684888, 'Dallas' ],
		loc => [ 32.7767, -96.7970 ] ),
	US_REG => place( reg => 'US' ),
	AU_BAD => place( cont => 'OC', cc => 'AU', cc_id => 2077456, cc_name => 'Australia',
		loc => [ 123.0, 200.0 ] ),
);

my @CITY = (
	[ '1.1.1.1/32',                    'AU_BAD' ],
	[ '1.80.0.0/13',                   'XA' ],
	[ '2.16.0.0/13',                   'PAR' ],
	[ '4.14.0.0/15',                   'NYC' ],
	[ '5.1.0.0/16',                    'FRA' ],
	[ '8.20.0.0/16',                   'US_REG' ],
	[ '24.0.0.0/12',                   'LAX' ],
	[ '36.96.0.0/12',                  'CN_NOLOC' ],
	[ '58.32.0.0/13',                  'SH_TEL' ],
	[ '81.2.69.0/24',                  'LON' ],
	[ '81.2.70.0/23',                  'LON' ],
	[ '101.80.0.0/13',                 'SH_TEL' ],
	[ '113.64.0.0/11',                 'GZ' ],
	[ '116.224.0.0/13',                'SH_A' ],
	[ '116.232.0.0/13',                'SH_B' ],
	[ '116.240.0.0/13',                'SH_B' ],
	[ '123.112.0.0/12',                'BJ_UNI' ],
	[ '175.41.128.0/17',               'SG' ],
	[ '202.112.0.0/16',                'BJ_EDU' ],
	[ '2001:da8::/32',                 'BJ_EDU' ],
	[ '2001:4860::/32',                'MTV' ],
	[ '240e::/20',                     'SH_TEL' ],
	[ '2408:8000::/20',                'BJ_UNI' ],
	[ '2600:1700::/28',                'DAL' ],
	[ '2a00:1450:4001:81c::200e/128', 'FRA' ],
	[ '2a01:4f8::/32',                 'FALK' ],
	[ '2a02:ffc0::/29',                'EU_ONLY' ],
);

my @ASN = (
	[ '4.14.0.0/15',    3356,  'LEVEL3' ],
	[ '14.16.0.0/13',   4134,  'CHINANET-BACKBONE' ],
	[ '14.24.0.0/13',   4134,  'CHINANET-BACKBONE' ],
	[ '58.32.0.0/13',   4812,  'China Telecom Group' ],
	[ '81.2.69.0/24',   20712, 'Andrews & Arnold Ltd' ],
	[ '101.80.0.0/13',  4812,  'China Telecom Group' ],
	[ '113.64.0.0/11',  4134,  'CHINANET-BACKBONE' ],
	[ '113.96.0.0/12',  4134,  'CHINANET-BACKBONE' ],
	[ '123.112.0.0/12', 4808,  'China Unicom Beijing Province Network' ],
	[ '202.112.0.0/16', 4538,  'China Education and Research Network Center' ],
	[ '2001:da8::/32',  23910, 'China Next Generation Internet CERNET2' ],
	[ '240e::/20',      4134,  'CHINANET-BACKBONE' ],
	[ '2408:8000::/20', 4837,  'CHINA UNICOM China169 Backbone' ],
);

sub build_small {
	my $city = new_tree( database_type => 'GeoIP2-City' );
	$city->insert_network( $_->[0], $REC{ $_->[1] } ) for @CITY;
	write_tree( $city, 'test-city.mmdb' );

	my $asn = new_tree( database_type => 'GeoLite2-ASN' );
	$asn->insert_network( $_->[0],
		{ autonomous_system_number => $_->[1], autonomous_system_organization => $_->[2] } )
	    for @ASN;
	write_tree( $asn, 'test-asn.mmdb' );

	my $v4 = new_tree( database_type => 'GeoLite2-Country', ip_version => 4, record_size => 28,
		alias_ipv6_to_ipv4 => 0 );
	$v4->insert_network( '58.32.0.0/13', place(%CN) );
	$v4->insert_network( '81.2.69.0/24', place(%GB) );
	$v4->insert_network( '4.14.0.0/15',  place(%US) );
	write_tree( $v4, 'test-country-v4.mmdb' );

	my $wide = new_tree( database_type => 'GeoLite2-Country', record_size => 32,
		alias_ipv6_to_ipv4 => 0, remove_reserved_networks => 0 );
	$wide->insert_network( '::/64',          place(%GB) );
	$wide->insert_network( '2a02:ffc0::/29', place(%DE) );
	write_tree( $wide, 'test-wide.mmdb' );

	my $anon = new_tree( database_type => 'GeoIP2-Anonymous-IP' );
	$anon->insert_network( '81.2.69.0/24', { is_anonymous => 1, is_anonymous_vpn => 1 } );
	write_tree( $anon, 'test-anonymous-ip.mmdb' );
}

# Synthetic City database: N IPv4 /24s spread over the unicast space plus N/8 IPv6 /48s, each
# with one of R records (city, subdivision, coordinates, postal code), so leaves outnumber
# records as in GeoLite2-City. Deterministic (fixed seed).
sub build_large {
	my ( $n, $file, $n_recs ) = @_;
	$n_recs //= int( $n / 8 );
	srand(42);
	my $tree = new_tree( database_type => 'GeoLite2-City' );
	my @conts = qw(AS EU NA OC);
	my @recs;
	for my $i ( 0 .. $n_recs - 1 ) {
		my $cont = $conts[ $i % 4 ];
		push @recs, place(
			cont   => $cont,
			cc     => sprintf( '%c%c', 65 + $i % 26, 65 + int( $i / 26 ) % 26 ),
			cc_id   => 1000 + $i % 676,
			cc_name => 'Country ' . $i % 676,
			sub    => [ sprintf( '%d', $i % 97 ), 2000 + $i % 5000, "Sub $i" ],
			city   => [ 100000 + $i, "City $i" ],
			loc    => [ -60 + ( $i * 7919 % 12000 ) / 100, -180 + ( $i * 104729 % 36000 ) / 100 ],
			postal => sprintf( '%05d', $i ),
		);
	}
	my %seen;
	for my $i ( 0 .. $n - 1 ) {
		my ( $a, $b, $c );
		do {
			$a = 1 + int( rand(222) );
			$b = int( rand(256) );
			$c = int( rand(256) );
		} while ( $a == 10 || $a == 127 || $a == 100 || $a == 169 || $a == 172 || $a == 192
			|| $a == 198 || $a == 203 || $seen{"$a.$b.$c"}++ );
		$tree->insert_network( "$a.$b.$c.0/24", $recs[ int( rand(@recs) ) ] );
	}
	for my $i ( 0 .. int( $n / 8 ) ) {
		my $net = sprintf( '2a%02x:%x:%x::/48', int( rand(256) ), int( rand(65536) ), $i % 65536 );
		$tree->insert_network( $net, $recs[ int( rand(@recs) ) ] );
	}
	write_tree( $tree, $file );
}

if ( @ARGV >= 3 && $ARGV[0] eq '--large' ) {
	build_large( $ARGV[1], $ARGV[2], $ARGV[3] );
} elsif (@ARGV) {
	die "usage: $0 [--large N FILE [RECORDS]]\n";
} else {
	build_small();
}
